/* SPDX-License-Identifier: MIT */
/*
 * Qparams helpers: the scales the fake-quant ops compute for themselves when no
 * frozen scale is given, exposed so callers can freeze them and pack with them.
 * The arithmetic lives in reference.c so the slots and these agree by
 * construction.
 */
#include "core/core.h"
#include "ops/quant/numerics.h"
#include "ops/quant/reference.h"

#include <stdio.h>

static ly_status check_f32(const ly_tensor *t, const char *fn, const char *name)
{
    char what[128];
    snprintf(what, sizeof what, "%s: %s", fn, name);
    return ly_check_tensor(t, what, LY_F32);
}

static ly_status check_scale_numel(const ly_tensor *scale, const char *fn, int64_t expected,
                                   const char *why)
{
    if (ly_tensor_numel(scale) == expected) return LY_OK;
    char buf[128];
    return ly_set_error(LY_E_SHAPE, "%s: scale: shape %s, expected %lld elements (%s)", fn,
                        ly_shape_str(scale, buf, sizeof buf), (long long)expected, why);
}

static ly_status check_weight_ndim(const ly_tensor *w, const char *fn, int min_ndim, int max_ndim)
{
    if (w->ndim >= min_ndim && w->ndim <= max_ndim) return LY_OK;
    char buf[128];
    if (min_ndim == max_ndim)
        return ly_set_error(LY_E_SHAPE, "%s: weight: shape %s, expected %d dims", fn,
                            ly_shape_str(w, buf, sizeof buf), min_ndim);
    return ly_set_error(LY_E_SHAPE, "%s: weight: shape %s, expected at least %d dim(s)", fn,
                        ly_shape_str(w, buf, sizeof buf), min_ndim);
}

ly_status ly_int8_weight_qparams(const ly_tensor *weight, int64_t axis, ly_tensor *scale)
{
    const char *fn = "ly_int8_weight_qparams";
    ly_status st = check_f32(weight, fn, "weight");
    if (st == LY_OK) st = check_weight_ndim(weight, fn, 1, LY_MAX_DIMS);
    if (st != LY_OK) return st;
    if (axis < -(int64_t)weight->ndim || axis >= weight->ndim)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: axis is %lld, expected -%d..%d", fn,
                            (long long)axis, weight->ndim, weight->ndim - 1);
    if (axis < 0) axis += weight->ndim;
    ly_axis_view view = ly_quant_axis_view(weight, axis);
    st = check_f32(scale, fn, "scale");
    if (st == LY_OK) st = check_scale_numel(scale, fn, view.channels, "shape[axis]");
    if (st != LY_OK) return st;
    ly_quant_channel_scale((const float *)weight->data, view, 127.0f, (float *)scale->data);
    return LY_OK;
}

ly_status ly_int8_act_qparams(float lo, float hi, float *scale, int32_t *zero_point)
{
    if (!scale || !zero_point)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_int8_act_qparams: scale and zero_point must not be NULL");
    ly_quant_int8_act_qparams(lo, hi, scale, zero_point);
    return LY_OK;
}

ly_status ly_fp8_weight_qparams(const ly_tensor *weight, bool tensorwise, ly_tensor *scale)
{
    const char *fn = "ly_fp8_weight_qparams";
    ly_status st = check_f32(weight, fn, "weight");
    if (st == LY_OK) st = check_weight_ndim(weight, fn, 1, LY_MAX_DIMS);
    if (st == LY_OK) st = check_f32(scale, fn, "scale");
    if (st == LY_OK) st = check_scale_numel(scale, fn, weight->shape[0], "one per output channel");
    if (st != LY_OK) return st;
    const float *w = (const float *)weight->data;
    float *s = (float *)scale->data;
    if (tensorwise) {
        /* One scale, repeated so the state keeps its per-channel shape. */
        float amax = ly_quant_amax(w, ly_tensor_numel(weight));
        float t = ly_nm_clamp_min(amax / LY_E4M3_MAX, LY_QUANT_EPS);
        for (int64_t i = 0; i < weight->shape[0]; i++)
            s[i] = t;
    } else {
        ly_quant_channel_scale(w, ly_quant_axis_view(weight, 0), LY_E4M3_MAX, s);
    }
    return LY_OK;
}

ly_status ly_fp8_act_qparams(float lo, float hi, float *scale)
{
    if (!scale)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_fp8_act_qparams: scale must not be NULL");
    /* No eps here (the op clamps the scale itself); NaN propagates. */
    *scale = ly_nm_max_nan(fabsf(lo), fabsf(hi)) / LY_E4M3_MAX;
    return LY_OK;
}

ly_status ly_int_group_qparams(const ly_tensor *weight, int64_t bits, int64_t group_size,
                               ly_tensor *scale)
{
    const char *fn = "ly_int_group_qparams";
    ly_status st = check_f32(weight, fn, "weight");
    if (st == LY_OK) st = check_weight_ndim(weight, fn, 2, 2);
    if (st != LY_OK) return st;
    if (bits != 2 && bits != 4)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: bits is %lld, expected 2 or 4", fn,
                            (long long)bits);
    if (group_size <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: group_size is %lld, expected > 0", fn,
                            (long long)group_size);
    int64_t rows = weight->shape[0], cols = weight->shape[1];
    int64_t groups = cols / group_size + (cols % group_size != 0);
    st = check_f32(scale, fn, "scale");
    if (st != LY_OK) return st;
    if (scale->ndim != 2 || scale->shape[0] != rows || scale->shape[1] != groups) {
        char buf[128];
        return ly_set_error(
            LY_E_SHAPE, "%s: scale: shape %s, expected [%lld, %lld] ([out, ceil(in / group_size)])",
            fn, ly_shape_str(scale, buf, sizeof buf), (long long)rows, (long long)groups);
    }
    ly_quant_group_scale((const float *)weight->data, rows, cols, group_size, bits,
                         (float *)scale->data);
    return LY_OK;
}
