/* SPDX-License-Identifier: MIT */
/*
 * The contracts of the quantization slots: one validator per slot family (the
 * backward slot reuses its forward's, with the gradient in front) and the
 * reference that serves the slot when nothing faster is eligible.
 */
#include "core/core.h"
#include "ops/ops_internal.h"
#include "ops/quant/reference.h"

#include <stdio.h>

/* The operands of one call as the forward op sees them: a backward call has its
 * gradient at in[0] and the forward's operands shifted by one. */
typedef struct operands {
    const char *slot;
    const ly_kernel_call *call;
    int base;
} operands;

static const ly_tensor *operand(const operands *o, int i)
{
    return o->call->in[o->base + i];
}

static ly_status check_operand(const operands *o, int i, const char *name, ly_dtype dtype)
{
    return ly_check_operand(operand(o, i), o->slot, name, dtype);
}

static ly_status check_min_ndim(const operands *o, int i, const char *name, int min_ndim)
{
    const ly_tensor *t = operand(o, i);
    if (t->ndim < min_ndim) {
        char buf[128];
        return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s has %d dims, expected at least %d",
                            o->slot, name, ly_shape_str(t, buf, sizeof buf), t->ndim, min_ndim);
    }
    return LY_OK;
}

static ly_status check_ndim(const operands *o, int i, const char *name, int ndim,
                            const char *layout)
{
    const ly_tensor *t = operand(o, i);
    if (t->ndim != ndim) {
        char buf[128];
        return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s, expected %d dims %s", o->slot, name,
                            ly_shape_str(t, buf, sizeof buf), ndim, layout);
    }
    return LY_OK;
}

static ly_status check_numel(const operands *o, int i, const char *name, int64_t numel,
                             const char *why)
{
    const ly_tensor *t = operand(o, i);
    if (ly_tensor_numel(t) != numel) {
        char buf[128];
        return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s, expected %lld element(s) (%s)", o->slot,
                            name, ly_shape_str(t, buf, sizeof buf), (long long)numel, why);
    }
    return LY_OK;
}

static ly_status check_shape2(const operands *o, int i, const char *name, int64_t d0, int64_t d1,
                              const char *layout)
{
    const ly_tensor *t = operand(o, i);
    if (t->ndim != 2 || t->shape[0] != d0 || t->shape[1] != d1) {
        char buf[128];
        return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s, expected [%lld, %lld] %s", o->slot, name,
                            ly_shape_str(t, buf, sizeof buf), (long long)d0, (long long)d1, layout);
    }
    return LY_OK;
}

static ly_status check_bits(const operands *o, int64_t bits)
{
    if (bits != 2 && bits != 4)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params.bits is %lld, expected 2 or 4",
                            o->slot, (long long)bits);
    return LY_OK;
}

static ly_status check_group_size(const operands *o, int64_t g)
{
    if (g <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params.group_size is %lld, expected > 0",
                            o->slot, (long long)g);
    return LY_OK;
}

/* in_features: -1 keeps every unpacked column, otherwise 0..available. */
static ly_status resolve_in_features(const operands *o, int64_t in, int64_t available,
                                     int64_t *cols)
{
    if (in == -1) {
        *cols = available;
        return LY_OK;
    }
    if (in < 0 || in > available)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.in_features is %lld, expected -1 (all) or 0..%lld (the "
                            "unpacked width)",
                            o->slot, (long long)in, (long long)available);
    *cols = in;
    return LY_OK;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

static void set_output(ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out, const ly_tensor *like)
{
    out[0] = (ly_tensor){.data = NULL, .dtype = LY_F32, .ndim = like->ndim};
    for (int i = 0; i < like->ndim; i++)
        out[0].shape[i] = like->shape[i];
    *n_out = 1;
}

static void set_output2(ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out, int64_t d0, int64_t d1)
{
    out[0] = (ly_tensor){.data = NULL, .dtype = LY_F32, .ndim = 2, .shape = {d0, d1}};
    *n_out = 1;
}

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

/* ---- Family validators (forward operands start at o->base) ----------------------------- */

static ly_status validate_int8_per_channel(const operands *o)
{
    TRY(check_operand(o, 0, "weight", LY_F32));
    TRY(check_min_ndim(o, 0, "weight", 1));
    const ly_tensor *w = operand(o, 0);
    int64_t axis = LY_PARAMS(o->call, ly_fake_quant_int8_per_channel_params)->axis;
    if (axis < -(int64_t)w->ndim || axis >= w->ndim)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.axis is %lld, expected -%d..%d for a %d-dim weight",
                            o->slot, (long long)axis, w->ndim, w->ndim - 1, w->ndim);
    if (operand(o, 1)) {
        int64_t channels = w->shape[axis < 0 ? axis + w->ndim : axis];
        TRY(check_operand(o, 1, "scale", LY_F32));
        TRY(check_numel(o, 1, "scale", channels, "one per channel along params.axis"));
    }
    return LY_OK;
}

static ly_status validate_int8_affine(const operands *o)
{
    TRY(check_operand(o, 0, "x", LY_F32));
    TRY(check_operand(o, 1, "lo", LY_F32));
    TRY(check_numel(o, 1, "lo", 1, "the calibrated minimum"));
    TRY(check_operand(o, 2, "hi", LY_F32));
    TRY(check_numel(o, 2, "hi", 1, "the calibrated maximum"));
    return LY_OK;
}

static ly_status validate_fp8(const operands *o)
{
    TRY(check_operand(o, 0, "x", LY_F32));
    TRY(check_min_ndim(o, 0, "x", 1));
    TRY(check_operand(o, 1, "scale", LY_F32));
    int64_t rows = operand(o, 0)->shape[0], n = ly_tensor_numel(operand(o, 1));
    if (n != 1 && n != rows)
        TRY(check_numel(o, 1, "scale", rows, "or 1: one scale, or one per index of x's dim 0"));
    return LY_OK;
}

static ly_status validate_int_grouped(const operands *o)
{
    TRY(check_operand(o, 0, "weight", LY_F32));
    TRY(check_ndim(o, 0, "weight", 2, "([out, in])"));
    const ly_fake_quant_int_grouped_params *p = o->call->params;
    TRY(check_bits(o, p->bits));
    TRY(check_group_size(o, p->group_size));
    if (operand(o, 1)) {
        const ly_tensor *w = operand(o, 0);
        TRY(check_operand(o, 1, "scale", LY_F32));
        TRY(check_shape2(o, 1, "scale", w->shape[0], ceil_div(w->shape[1], p->group_size),
                         "([out, ceil(in / group_size)])"));
    }
    return LY_OK;
}

static ly_status validate_nvfp4_weight(const operands *o)
{
    TRY(check_operand(o, 0, "weight", LY_F32));
    TRY(check_min_ndim(o, 0, "weight", 1));
    TRY(check_operand(o, 1, "tensor_amax", LY_F32));
    TRY(check_numel(o, 1, "tensor_amax", 1, "max|W| captured when the layer was converted"));
    return LY_OK;
}

static ly_status validate_fp4_input(const operands *o)
{
    TRY(check_operand(o, 0, "x", LY_F32));
    TRY(check_min_ndim(o, 0, "x", 1));
    return LY_OK;
}

static ly_status validate_fp4_weight(const operands *o)
{
    TRY(check_operand(o, 0, "weight", LY_F32));
    TRY(check_min_ndim(o, 0, "weight", 1));
    return LY_OK;
}

typedef ly_status (*family_validator)(const operands *o);

/* Forward: validate, output has the shape of operand 0. */
static ly_status infer_forward(const char *slot, family_validator validate,
                               const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                               int *n_out)
{
    if (!call || !out || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call, out and n_out are required", slot);
    operands o = {slot, call, 0};
    TRY(validate(&o));
    set_output(out, n_out, call->in[0]);
    return LY_OK;
}

/* Backward: grad first, then the forward's operands; output has grad's shape. */
static ly_status infer_backward(const char *slot, family_validator validate,
                                const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                int *n_out)
{
    if (!call || !out || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call, out and n_out are required", slot);
    operands o = {slot, call, 1};
    char what[128];
    snprintf(what, sizeof what, "%s: grad", slot);
    TRY(ly_check_tensor(call->in[0], what, LY_F32));
    TRY(validate(&o));
    char input_name[128];
    snprintf(input_name, sizeof input_name, "%s: the forward input in[1]", slot);
    TRY(ly_check_same_shape(call->in[1], input_name, call->in[0], what));
    set_output(out, n_out, call->in[0]);
    return LY_OK;
}

/* ---- Unpack validators ------------------------------------------------------------------ */

ly_status ly_contract_unpack_int_grouped(const ly_kernel_call *call,
                                         ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    const char *slot = ly_op_name(LY_OP_UNPACK_INT_GROUPED);
    if (!call || !out || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call, out and n_out are required", slot);
    operands o = {slot, call, 0};
    TRY(check_operand(&o, 0, "payload", LY_U8));
    TRY(check_ndim(&o, 0, "payload", 2, "([out, P])"));
    TRY(check_operand(&o, 1, "scale", LY_F32));
    TRY(check_ndim(&o, 1, "scale", 2, "([out, ng])"));
    const ly_unpack_int_grouped_params *p = call->params;
    TRY(check_bits(&o, p->bits));
    TRY(check_group_size(&o, p->group_size));
    const ly_tensor *payload = call->in[0], *scale = call->in[1];
    int64_t rows = payload->shape[0], width = payload->shape[1], groups = scale->shape[1];
    int64_t bits = p->bits, g = p->group_size;
    TRY(check_shape2(&o, 1, "scale", rows, groups, "(one row per payload row)"));
    int64_t unpacked, payload_bits, group_bits;
    bool overflow = __builtin_mul_overflow(groups, g, &unpacked) ||
                    __builtin_mul_overflow(unpacked, bits, &group_bits) ||
                    __builtin_mul_overflow(width, (int64_t)8, &payload_bits);
    if (overflow || payload_bits != group_bits)
        return ly_set_error(LY_E_SHAPE,
                            "%s: payload: %lld bytes per row hold %lld %lld-bit codes, expected "
                            "ng * group_size = %lld * %lld codes (P * 8 / bits == ng * g)",
                            slot, (long long)width,
                            (long long)(overflow ? -1 : payload_bits / bits), (long long)bits,
                            (long long)groups, (long long)g);
    int64_t cols = 0;
    TRY(resolve_in_features(&o, p->in_features, unpacked, &cols));
    set_output2(out, n_out, rows, cols);
    return LY_OK;
}

ly_status ly_contract_unpack_nvfp4(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                   int *n_out)
{
    const char *slot = ly_op_name(LY_OP_UNPACK_NVFP4);
    if (!call || !out || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call, out and n_out are required", slot);
    operands o = {slot, call, 0};
    TRY(check_operand(&o, 0, "payload", LY_U8));
    TRY(check_ndim(&o, 0, "payload", 2, "([out, nb * 8])"));
    /* E4M3 codes (f8e4m3, or u8 as .npy files carry them) or fp32 values. */
    const ly_tensor *bs = call->in[1];
    if (bs && bs->dtype != LY_F8E4M3 && bs->dtype != LY_U8 && bs->dtype != LY_F32)
        return ly_set_error(LY_E_DTYPE,
                            "%s: block_scale: dtype %s, expected f8e4m3 (or u8 holding E4M3 "
                            "codes) or f32",
                            slot, ly_dtype_name(bs->dtype));
    TRY(check_operand(&o, 1, "block_scale", bs ? bs->dtype : LY_F8E4M3));
    TRY(check_ndim(&o, 1, "block_scale", 2, "([out, nb])"));
    TRY(check_operand(&o, 2, "tensor_amax", LY_F32));
    TRY(check_numel(&o, 2, "tensor_amax", 1, "max|W| captured when the layer was converted"));
    const ly_tensor *payload = call->in[0];
    int64_t rows = payload->shape[0], width = payload->shape[1], blocks = bs->shape[1];
    TRY(check_shape2(&o, 1, "block_scale", rows, blocks, "(one row per payload row)"));
    int64_t expected_width;
    if (__builtin_mul_overflow(blocks, (int64_t)(LY_NVFP4_BLOCK / 2), &expected_width) ||
        width != expected_width)
        return ly_set_error(LY_E_SHAPE,
                            "%s: payload: %lld bytes per row, expected nb * 8 = %lld * 8 (two "
                            "4-bit codes per byte, %d per block)",
                            slot, (long long)width, (long long)blocks, LY_NVFP4_BLOCK);
    int64_t cols = 0;
    TRY(resolve_in_features(&o, LY_PARAMS(call, ly_unpack_nvfp4_params)->in_features,
                            blocks * LY_NVFP4_BLOCK, &cols));
    set_output2(out, n_out, rows, cols);
    return LY_OK;
}

/* ---- The contracts ------------------------------------------------------------------ */

#define FORWARD_CONTRACT(ID, name, validator)                                                      \
    ly_status ly_contract_##name(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS], \
                                 int *n_out)                                                       \
    {                                                                                              \
        return infer_forward(ly_op_name(LY_OP_##ID), validator, call, out, n_out);                 \
    }                                                                                              \
    ly_status ly_contract_##name##_backward(const ly_kernel_call *call,                            \
                                            ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)      \
    {                                                                                              \
        return infer_backward(ly_op_name(LY_OP_##ID##_BACKWARD), validator, call, out, n_out);     \
    }

FORWARD_CONTRACT(FAKE_QUANT_INT8_PER_CHANNEL, fake_quant_int8_per_channel,
                 validate_int8_per_channel)
FORWARD_CONTRACT(FAKE_QUANT_INT8_AFFINE, fake_quant_int8_affine, validate_int8_affine)
FORWARD_CONTRACT(FAKE_QUANT_FP8, fake_quant_fp8, validate_fp8)
FORWARD_CONTRACT(FAKE_QUANT_INT_GROUPED, fake_quant_int_grouped, validate_int_grouped)
FORWARD_CONTRACT(FAKE_QUANT_NVFP4_WEIGHT, fake_quant_nvfp4_weight, validate_nvfp4_weight)
FORWARD_CONTRACT(FAKE_QUANT_NVFP4_DYNAMIC, fake_quant_nvfp4_dynamic, validate_fp4_input)
FORWARD_CONTRACT(FAKE_QUANT_MXFP4_WEIGHT, fake_quant_mxfp4_weight, validate_fp4_weight)
FORWARD_CONTRACT(FAKE_QUANT_MXFP4_DYNAMIC, fake_quant_mxfp4_dynamic, validate_fp4_input)

LY_PARAMS_FIELDS(ly_fake_quant_int8_per_channel_params,
                 LY_FIELD_INT(ly_fake_quant_int8_per_channel_params, axis, 1))
LY_PARAMS_FIELDS(ly_fake_quant_int_grouped_params,
                 LY_FIELD_INT(ly_fake_quant_int_grouped_params, bits, 1),
                 LY_FIELD_INT(ly_fake_quant_int_grouped_params, group_size, 1))
LY_PARAMS_FIELDS(ly_unpack_int_grouped_params, LY_FIELD_INT(ly_unpack_int_grouped_params, bits, 1),
                 LY_FIELD_INT(ly_unpack_int_grouped_params, group_size, 1),
                 LY_FIELD_INT(ly_unpack_int_grouped_params, in_features, 1))
LY_PARAMS_FIELDS(ly_unpack_nvfp4_params, LY_FIELD_INT(ly_unpack_nvfp4_params, in_features, 1))
