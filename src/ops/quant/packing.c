/* SPDX-License-Identifier: MIT */
/*
 * The packed checkpoint formats (spec section 3): the contract between a finalized
 * checkpoint and inference, with no variants. unpack(pack(W)) equals the fake-quant
 * simulation of W in value, because pack computes its codes with the very same
 * primitives as the fake-quant reference.
 *
 * Layouts: sub-byte codes are packed low bits first (the even column in the low
 * nibble). int codes are q - qmin. FP4 codes are sign << 3 | E2M1 index, the sign
 * set only for a strictly negative scaled value.
 */
#include "core/core.h"
#include "ops/quant/numerics.h"
#include "ops/quant/reference.h"

#include <stdio.h>
#include <string.h>

/* ---- Validation helpers ------------------------------------------------------------- */

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

static ly_status check(const ly_tensor *t, const char *fn, const char *name, ly_dtype dtype)
{
    char what[128];
    snprintf(what, sizeof what, "%s: %s", fn, name);
    return ly_check_tensor(t, what, dtype);
}

/* E4M3 codes travel as f8e4m3, or as u8 (how .npy files carry them). */
static ly_status check_e4m3_codes(const ly_tensor *t, const char *fn, const char *name)
{
    if (t && t->dtype == LY_U8) return check(t, fn, name, LY_U8);
    return check(t, fn, name, LY_F8E4M3);
}

static ly_status check_min_ndim(const ly_tensor *t, const char *fn, const char *name, int min_ndim)
{
    if (t->ndim >= min_ndim) return LY_OK;
    char buf[128];
    return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s, expected at least %d dim(s)", fn, name,
                        ly_shape_str(t, buf, sizeof buf), min_ndim);
}

static ly_status check_shape2(const ly_tensor *t, const char *fn, const char *name, int64_t d0,
                              int64_t d1, const char *layout)
{
    if (t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1) return LY_OK;
    char buf[128];
    return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s, expected [%lld, %lld] %s", fn, name,
                        ly_shape_str(t, buf, sizeof buf), (long long)d0, (long long)d1, layout);
}

static ly_status check_2d(const ly_tensor *t, const char *fn, const char *name)
{
    if (t->ndim == 2) return LY_OK;
    char buf[128];
    return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s, expected 2 dims ([out, in])", fn, name,
                        ly_shape_str(t, buf, sizeof buf));
}

static ly_status check_same_shape(const ly_tensor *ref, const char *ref_name, const ly_tensor *t,
                                  const char *fn, const char *name)
{
    char what_ref[128], what[128];
    snprintf(what_ref, sizeof what_ref, "%s: %s", fn, ref_name);
    snprintf(what, sizeof what, "%s: %s", fn, name);
    return ly_check_same_shape(ref, what_ref, t, what);
}

/* Scales of the per-output-channel formats: one per index of dim 0. */
static ly_status check_row_scale(const ly_tensor *scale, const char *fn, int64_t rows)
{
    TRY(check(scale, fn, "scale", LY_F32));
    if (ly_tensor_numel(scale) == rows) return LY_OK;
    char buf[128];
    return ly_set_error(LY_E_SHAPE,
                        "%s: scale: shape %s, expected %lld elements (one per index of dim 0)", fn,
                        ly_shape_str(scale, buf, sizeof buf), (long long)rows);
}

static ly_status check_bits_group(const char *fn, int64_t bits, int64_t group_size)
{
    if (bits != 2 && bits != 4)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: bits is %lld, expected 2 or 4", fn,
                            (long long)bits);
    if (group_size <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: group_size is %lld, expected > 0", fn,
                            (long long)group_size);
    return LY_OK;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

static ly_status resolve_in_features(const char *fn, int64_t in_features, int64_t available,
                                     int64_t *cols)
{
    if (in_features == -1) {
        *cols = available;
        return LY_OK;
    }
    if (in_features < 0 || in_features > available)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: in_features is %lld, expected -1 (all) or 0..%lld (the unpacked "
                            "width)",
                            fn, (long long)in_features, (long long)available);
    *cols = in_features;
    return LY_OK;
}

/* A 4-bit code into a row of nibbles, the even column in the low nibble. */
static void put_nibble(uint8_t *row, int64_t col, uint8_t code)
{
    row[col / 2] |= (uint8_t)((col % 2) ? code << 4 : code);
}

static uint8_t get_nibble(const uint8_t *row, int64_t col)
{
    return (uint8_t)((col % 2) ? row[col / 2] >> 4 : row[col / 2] & 0xFu);
}

/* ---- int8 --------------------------------------------------------------------------- */

/* The code is the clamped int64 code of the per-channel fake-quantize, so it is the
 * one round(fq / s) recovers, by construction. */
ly_status ly_pack_int8(const ly_tensor *weight, const ly_tensor *scale, ly_tensor *codes)
{
    const char *fn = "ly_pack_int8";
    TRY(check(weight, fn, "weight", LY_F32));
    TRY(check_min_ndim(weight, fn, "weight", 1));
    TRY(check_row_scale(scale, fn, weight->shape[0]));
    TRY(check(codes, fn, "codes", LY_I8));
    TRY(check_same_shape(weight, "weight", codes, fn, "codes"));
    int64_t n = ly_tensor_numel(weight);
    if (n == 0) return LY_OK;
    int64_t rows = weight->shape[0], inner = n / rows;
    const float *w = (const float *)weight->data;
    const float *s = (const float *)scale->data;
    int8_t *out = (int8_t *)codes->data;
    for (int64_t r = 0; r < rows; r++) {
        float inv = 1.0f / ly_nm_clamp_min(s[r], LY_QUANT_EPS);
        for (int64_t i = r * inner; i < (r + 1) * inner; i++)
            out[i] = (int8_t)ly_nm_clamp_i64(ly_nm_int8_code(w[i], inv, 0.0f), -128, 127);
    }
    return LY_OK;
}

ly_status ly_unpack_int8(const ly_tensor *codes, const ly_tensor *scale, ly_tensor *out)
{
    const char *fn = "ly_unpack_int8";
    TRY(check(codes, fn, "codes", LY_I8));
    TRY(check_min_ndim(codes, fn, "codes", 1));
    TRY(check_row_scale(scale, fn, codes->shape[0]));
    TRY(check(out, fn, "out", LY_F32));
    TRY(check_same_shape(codes, "codes", out, fn, "out"));
    int64_t n = ly_tensor_numel(codes);
    if (n == 0) return LY_OK;
    int64_t rows = codes->shape[0], inner = n / rows;
    const int8_t *c = (const int8_t *)codes->data;
    const float *s = (const float *)scale->data;
    float *o = (float *)out->data;
    for (int64_t r = 0; r < rows; r++) {
        float sr = ly_nm_clamp_min(s[r], LY_QUANT_EPS);
        for (int64_t i = r * inner; i < (r + 1) * inner; i++)
            o[i] = (float)c[i] * sr;
    }
    return LY_OK;
}

/* ---- fp8 ---------------------------------------------------------------------------- */

ly_status ly_pack_fp8(const ly_tensor *weight, const ly_tensor *scale, ly_tensor *codes)
{
    const char *fn = "ly_pack_fp8";
    TRY(check(weight, fn, "weight", LY_F32));
    TRY(check_min_ndim(weight, fn, "weight", 1));
    TRY(check_row_scale(scale, fn, weight->shape[0]));
    TRY(check_e4m3_codes(codes, fn, "codes"));
    TRY(check_same_shape(weight, "weight", codes, fn, "codes"));
    int64_t n = ly_tensor_numel(weight);
    if (n == 0) return LY_OK;
    int64_t rows = weight->shape[0], inner = n / rows;
    const float *w = (const float *)weight->data;
    const float *s = (const float *)scale->data;
    uint8_t *out = (uint8_t *)codes->data;
    for (int64_t r = 0; r < rows; r++) {
        float sr = ly_nm_clamp_min(s[r], LY_QUANT_EPS);
        for (int64_t i = r * inner; i < (r + 1) * inner; i++)
            out[i] = ly_nm_fp32_to_e4m3(ly_nm_clamp(w[i] / sr, -LY_E4M3_MAX, LY_E4M3_MAX));
    }
    return LY_OK;
}

ly_status ly_unpack_fp8(const ly_tensor *codes, const ly_tensor *scale, ly_tensor *out)
{
    const char *fn = "ly_unpack_fp8";
    TRY(check_e4m3_codes(codes, fn, "codes"));
    TRY(check_min_ndim(codes, fn, "codes", 1));
    TRY(check_row_scale(scale, fn, codes->shape[0]));
    TRY(check(out, fn, "out", LY_F32));
    TRY(check_same_shape(codes, "codes", out, fn, "out"));
    int64_t n = ly_tensor_numel(codes);
    if (n == 0) return LY_OK;
    int64_t rows = codes->shape[0], inner = n / rows;
    const uint8_t *c = (const uint8_t *)codes->data;
    const float *s = (const float *)scale->data;
    float *o = (float *)out->data;
    for (int64_t r = 0; r < rows; r++) {
        float sr = ly_nm_clamp_min(s[r], LY_QUANT_EPS);
        for (int64_t i = r * inner; i < (r + 1) * inner; i++)
            o[i] = ly_nm_e4m3_to_fp32(c[i]) * sr;
    }
    return LY_OK;
}

/* ---- int4 / int2 grouped -------------------------------------------------------------- */

ly_status ly_pack_int_grouped(const ly_tensor *weight, const ly_tensor *scale, int64_t bits,
                              int64_t group_size, ly_tensor *payload)
{
    const char *fn = "ly_pack_int_grouped";
    TRY(check(weight, fn, "weight", LY_F32));
    TRY(check_2d(weight, fn, "weight"));
    TRY(check_bits_group(fn, bits, group_size));
    int64_t rows = weight->shape[0], cols = weight->shape[1];
    int64_t groups = ceil_div(cols, group_size);
    int64_t padded, padded_bits;
    if (__builtin_mul_overflow(groups, group_size, &padded) ||
        __builtin_mul_overflow(padded, bits, &padded_bits))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: group_size %lld is too large", fn,
                            (long long)group_size);
    if (padded_bits % 8 != 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: a row of ceil(in / g) * g = %lld %lld-bit codes does not fill "
                            "whole bytes; expected a group size that does",
                            fn, (long long)padded, (long long)bits);
    TRY(check(scale, fn, "scale", LY_F32));
    TRY(check_shape2(scale, fn, "scale", rows, groups, "([out, ceil(in / group_size)])"));
    TRY(check(payload, fn, "payload", LY_U8));
    int64_t width = padded_bits / 8;
    TRY(check_shape2(payload, fn, "payload", rows, width, "([out, ceil(in / g) * g * bits / 8])"));
    if (rows == 0 || width == 0) return LY_OK;

    const float *w = (const float *)weight->data;
    const float *s = (const float *)scale->data;
    uint8_t *p = (uint8_t *)payload->data;
    float qmax = (float)((1 << (bits - 1)) - 1), qmin = (float)(-(1 << (bits - 1)));
    int64_t per_byte = 8 / bits;
    memset(p, 0, (size_t)(rows * width));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < padded; c++) {
            /* Padding columns are zeros, which store q = 0. */
            float v = c < cols ? w[r * cols + c] : 0.0f;
            float sg = ly_nm_clamp_min(s[r * groups + c / group_size], LY_QUANT_EPS);
            float q = ly_nm_clamp(nearbyintf(v / sg), qmin, qmax);
            if (q != q)
                return ly_set_error(LY_E_INVALID_ARGUMENT,
                                    "%s: weight[%lld, %lld] / scale is NaN, which has no %lld-bit "
                                    "code; expected finite weights and scales",
                                    fn, (long long)r, (long long)c, (long long)bits);
            uint8_t code = (uint8_t)(q - qmin);
            p[r * width + c / per_byte] |= (uint8_t)(code << ((c % per_byte) * bits));
        }
    return LY_OK;
}

ly_status ly_unpack_int_grouped(const ly_tensor *payload, const ly_tensor *scale, int64_t bits,
                                int64_t group_size, int64_t in_features, ly_tensor *out)
{
    ly_kernel_call call;
    TRY(ly_kernel_call_init(&call));
    call.in[0] = payload;
    call.in[1] = scale;
    call.out[0] = out;
    ly_unpack_int_grouped_params p = {
        .bits = bits, .group_size = group_size, .in_features = in_features};
    call.params = &p;
    return ly_kernel_dispatch_op(LY_OP_UNPACK_INT_GROUPED, &call);
}

/* ---- nvfp4 ------------------------------------------------------------------------------- */

ly_status ly_pack_nvfp4(const ly_tensor *weight, const ly_tensor *tensor_amax, ly_tensor *payload,
                        ly_tensor *block_scale)
{
    const char *fn = "ly_pack_nvfp4";
    TRY(check(weight, fn, "weight", LY_F32));
    TRY(check_2d(weight, fn, "weight"));
    TRY(check(tensor_amax, fn, "tensor_amax", LY_F32));
    if (ly_tensor_numel(tensor_amax) != 1)
        return ly_set_error(LY_E_SHAPE, "%s: tensor_amax: %lld elements, expected 1 (max|W|)", fn,
                            (long long)ly_tensor_numel(tensor_amax));
    int64_t rows = weight->shape[0], cols = weight->shape[1];
    int64_t blocks = ceil_div(cols, LY_NVFP4_BLOCK);
    TRY(check(payload, fn, "payload", LY_U8));
    TRY(check_shape2(payload, fn, "payload", rows, blocks * (LY_NVFP4_BLOCK / 2),
                     "([out, ceil(in / 16) * 8])"));
    TRY(check_e4m3_codes(block_scale, fn, "block_scale"));
    TRY(check_shape2(block_scale, fn, "block_scale", rows, blocks, "([out, ceil(in / 16)])"));
    if (rows == 0 || blocks == 0) return LY_OK;

    const float *w = (const float *)weight->data;
    uint8_t *p = (uint8_t *)payload->data;
    uint8_t *bs_codes = (uint8_t *)block_scale->data;
    int64_t width = blocks * (LY_NVFP4_BLOCK / 2);
    float ts = ly_nm_nvfp4_tensor_scale(((const float *)tensor_amax->data)[0]);
    memset(p, 0, (size_t)(rows * width));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t begin = b * LY_NVFP4_BLOCK;
            int64_t end = begin + LY_NVFP4_BLOCK < cols ? begin + LY_NVFP4_BLOCK : cols;
            const float *v = w + r * cols;
            float bs = ly_nm_nvfp4_block_scale(ly_quant_amax(v + begin, end - begin), ts);
            float eff = ly_nm_nvfp4_eff(bs, ts);
            bs_codes[r * blocks + b] = ly_nm_fp32_to_e4m3(bs); /* exact: bs is on the grid */
            /* The padding is coded too, as the reference pads before coding (0 / eff is
             * 0, or NaN in a NaN block, which codes as 7). */
            for (int64_t c = begin; c < begin + LY_NVFP4_BLOCK; c++) {
                float y = (c < cols ? v[c] : 0.0f) / eff;
                put_nibble(p + r * width, c, ly_nm_e2m1_code(y));
            }
        }
    return LY_OK;
}

ly_status ly_unpack_nvfp4(const ly_tensor *payload, const ly_tensor *block_scale,
                          const ly_tensor *tensor_amax, int64_t in_features, ly_tensor *out)
{
    ly_kernel_call call;
    TRY(ly_kernel_call_init(&call));
    call.in[0] = payload;
    call.in[1] = block_scale;
    call.in[2] = tensor_amax;
    call.out[0] = out;
    ly_unpack_nvfp4_params p = {.in_features = in_features};
    call.params = &p;
    return ly_kernel_dispatch_op(LY_OP_UNPACK_NVFP4, &call);
}

/* ---- mxfp4 ------------------------------------------------------------------------------ */

ly_status ly_pack_mxfp4(const ly_tensor *weight, ly_tensor *payload, ly_tensor *block_exp)
{
    const char *fn = "ly_pack_mxfp4";
    TRY(check(weight, fn, "weight", LY_F32));
    TRY(check_2d(weight, fn, "weight"));
    int64_t rows = weight->shape[0], cols = weight->shape[1];
    int64_t blocks = ceil_div(cols, LY_MXFP4_BLOCK);
    TRY(check(payload, fn, "payload", LY_U8));
    TRY(check_shape2(payload, fn, "payload", rows, blocks * (LY_MXFP4_BLOCK / 2),
                     "([out, ceil(in / 32) * 16])"));
    TRY(check(block_exp, fn, "block_exp", LY_I8));
    TRY(check_shape2(block_exp, fn, "block_exp", rows, blocks, "([out, ceil(in / 32)])"));
    if (rows == 0 || blocks == 0) return LY_OK;

    const float *w = (const float *)weight->data;
    uint8_t *p = (uint8_t *)payload->data;
    int8_t *exps = (int8_t *)block_exp->data;
    int64_t width = blocks * (LY_MXFP4_BLOCK / 2);
    memset(p, 0, (size_t)(rows * width));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t begin = b * LY_MXFP4_BLOCK;
            int64_t end = begin + LY_MXFP4_BLOCK < cols ? begin + LY_MXFP4_BLOCK : cols;
            const float *v = w + r * cols;
            int e;
            if (!ly_nm_mxfp4_exponent(ly_quant_amax(v + begin, end - begin), &e))
                return ly_set_error(LY_E_INVALID_ARGUMENT,
                                    "%s: weight row %lld, block %lld holds a NaN: its scale "
                                    "exponent is NaN, which an int8 block_exp cannot store; "
                                    "expected NaN-free weights",
                                    fn, (long long)r, (long long)b);
            float eff = ldexpf(1.0f, e);
            exps[r * blocks + b] = (int8_t)e;
            for (int64_t c = begin; c < end; c++)
                put_nibble(p + r * width, c, ly_nm_e2m1_code(v[c] / eff));
            /* Padding: 0 / eff = 0 is code 0, which the memset already wrote. */
        }
    return LY_OK;
}

ly_status ly_unpack_mxfp4(const ly_tensor *payload, const ly_tensor *block_exp, int64_t in_features,
                          ly_tensor *out)
{
    const char *fn = "ly_unpack_mxfp4";
    TRY(check(payload, fn, "payload", LY_U8));
    TRY(check_2d(payload, fn, "payload"));
    TRY(check(block_exp, fn, "block_exp", LY_I8));
    TRY(check_2d(block_exp, fn, "block_exp"));
    int64_t rows = payload->shape[0], width = payload->shape[1], blocks = block_exp->shape[1];
    TRY(check_shape2(block_exp, fn, "block_exp", rows, blocks, "(one row per payload row)"));
    int64_t expected_width;
    if (__builtin_mul_overflow(blocks, (int64_t)(LY_MXFP4_BLOCK / 2), &expected_width) ||
        width != expected_width)
        return ly_set_error(LY_E_SHAPE,
                            "%s: payload: %lld bytes per row, expected nb * 16 = %lld * 16 (two "
                            "4-bit codes per byte, %d per block)",
                            fn, (long long)width, (long long)blocks, LY_MXFP4_BLOCK);
    int64_t cols = 0;
    TRY(resolve_in_features(fn, in_features, blocks * LY_MXFP4_BLOCK, &cols));
    TRY(check(out, fn, "out", LY_F32));
    TRY(check_shape2(out, fn, "out", rows, cols, "([out, in_features])"));

    const uint8_t *p = (const uint8_t *)payload->data;
    const int8_t *exps = (const int8_t *)block_exp->data;
    float *o = (float *)out->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float eff = ldexpf(1.0f, exps[r * blocks + c / LY_MXFP4_BLOCK]);
            o[r * cols + c] = ly_nm_e2m1_decode(get_nibble(p + r * width, c)) * eff;
        }
    return LY_OK;
}
