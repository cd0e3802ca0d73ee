/* SPDX-License-Identifier: MIT */
/*
 * The contracts of the network-op slots (include/libreyolo/nn.h): one validator
 * per slot that checks operands and params and gives the output shape, and the
 * reference that serves the slot when nothing faster is eligible.
 */
#include "core/core.h"
#include "libreyolo/nn.h"
#include "ops/nn/reference.h"
#include "ops/ops_internal.h"

#include <math.h>
#include <stdio.h>

/* Bounds on scalar params: far beyond any network, small enough that output
 * extents computed from them cannot overflow. */
#define MAX_WINDOW_PARAM (1 << 20)
#define MAX_SCALE (1 << 16)

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

static ly_status check_operand(const char *slot, const ly_tensor *t, const char *name)
{
    return ly_check_operand(t, slot, name, LY_F32);
}

static ly_status check_ndim(const char *slot, const ly_tensor *t, const char *name, int ndim,
                            const char *layout)
{
    if (t->ndim == ndim) return LY_OK;
    char buf[128];
    return ly_set_error(LY_E_SHAPE, "%s: %s: shape %s, expected %d dims %s", slot, name,
                        ly_shape_str(t, buf, sizeof buf), ndim, layout);
}

static ly_status check_pair(const char *slot, const char *param, const int64_t v[2], int64_t lo,
                            int64_t hi)
{
    for (int i = 0; i < 2; i++)
        if (v[i] < lo || v[i] > hi)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: params.%s is (%lld, %lld), expected each in [%lld, %lld]",
                                slot, param, (long long)v[0], (long long)v[1], (long long)lo,
                                (long long)hi);
    return LY_OK;
}

static ly_status check_call(const char *slot, const ly_kernel_call *call,
                            ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    if (!call || !out || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call, out and n_out are required", slot);
    return LY_OK;
}

/* The output must be addressable in bytes. */
static ly_status check_output_size(const char *slot, int ndim, const int64_t *shape)
{
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(numel, shape[d], &numel) || numel > INT64_MAX / 8)
            return ly_set_error(LY_E_SHAPE, "%s: the output overflows the address space", slot);
    return LY_OK;
}

static void set_output(ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out, int ndim,
                       const int64_t *shape)
{
    out[0] = (ly_tensor){.data = NULL, .dtype = LY_F32, .ndim = ndim};
    for (int i = 0; i < ndim; i++)
        out[0].shape[i] = shape[i];
    *n_out = 1;
}

/* Output extent along one axis, or an error naming the axis when the window
 * does not fit. */
static ly_status out_extent(const char *slot, const char *axis, int64_t in, int64_t kernel,
                            int64_t stride, int64_t padding, int64_t dilation, int64_t *extent)
{
    *extent = ly_nn_out_extent(in, kernel, stride, padding, dilation);
    if (*extent >= 1) return LY_OK;
    return ly_set_error(LY_E_SHAPE,
                        "%s: the %s window (kernel %lld, dilation %lld) spans %lld, more than the "
                        "padded input %lld + 2 * %lld; expected an output of at least 1",
                        slot, axis, (long long)kernel, (long long)dilation,
                        (long long)(dilation * (kernel - 1) + 1), (long long)in,
                        (long long)padding);
}

/* ---- conv2d -------------------------------------------------------------------------- */

/* What conv2d and conv2d_int8 share: x, the window, the weight (of `weight_dtype`),
 * bias and residual. */
static ly_status contract_conv(const char *slot, ly_dtype weight_dtype, const ly_kernel_call *call,
                               ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    TRY(check_call(slot, call, out, n_out));
    const ly_conv2d_params *p = call->params;
    const ly_tensor *x = call->in[0], *w = call->in[1], *bias = call->in[2],
                    *residual = call->in[3];
    TRY(check_operand(slot, x, "x"));
    TRY(check_ndim(slot, x, "x", 4, "([N, C, H, W])"));
    TRY(ly_check_operand(w, slot, "weight", weight_dtype));
    TRY(check_ndim(slot, w, "weight", 4, "([O, C / groups, kh, kw])"));
    TRY(check_pair(slot, "stride", p->stride, 1, MAX_WINDOW_PARAM));
    TRY(check_pair(slot, "padding", p->padding, 0, MAX_WINDOW_PARAM));
    TRY(check_pair(slot, "dilation", p->dilation, 1, MAX_WINDOW_PARAM));
    if (p->activation < LY_ACT_NONE || p->activation > LY_ACT_LEAKY_RELU)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.activation is %lld, expected an ly_activation (0 none, "
                            "1 silu, 2 sigmoid, 3 relu, 4 leaky relu)",
                            slot, (long long)p->activation);
    if (p->activation == LY_ACT_LEAKY_RELU && !isfinite(p->alpha))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.alpha is %g, expected a finite negative slope", slot,
                            p->alpha);
    if (p->post_affine && (!isfinite((float)p->post_scale) || !isfinite((float)p->post_shift)))
        return ly_set_error(
            LY_E_INVALID_ARGUMENT,
            "%s: params.post_scale %g and post_shift %g, expected finite f32 values", slot,
            p->post_scale, p->post_shift);
    int64_t groups = p->groups, c = x->shape[1], o = w->shape[0];
    if (groups < 1 || groups > c || c % groups != 0 || o % groups != 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.groups is %lld, expected >= 1 dividing both the input "
                            "channels %lld and the output channels %lld",
                            slot, (long long)groups, (long long)c, (long long)o);
    char ws[128], xs[128];
    if (w->shape[1] != c / groups)
        return ly_set_error(LY_E_SHAPE,
                            "%s: weight: shape %s, expected dim 1 = C / groups = %lld / %lld "
                            "(x is %s)",
                            slot, ly_shape_str(w, ws, sizeof ws), (long long)c, (long long)groups,
                            ly_shape_str(x, xs, sizeof xs));
    if (o < 1 || w->shape[2] < 1 || w->shape[3] < 1 || w->shape[2] > MAX_WINDOW_PARAM ||
        w->shape[3] > MAX_WINDOW_PARAM)
        return ly_set_error(LY_E_SHAPE,
                            "%s: weight: shape %s, expected at least one output channel and a "
                            "kernel of 1..%d per axis",
                            slot, ly_shape_str(w, ws, sizeof ws), MAX_WINDOW_PARAM);
    int64_t shape[4] = {x->shape[0], o, 0, 0};
    TRY(out_extent(slot, "height", x->shape[2], w->shape[2], p->stride[0], p->padding[0],
                   p->dilation[0], &shape[2]));
    TRY(out_extent(slot, "width", x->shape[3], w->shape[3], p->stride[1], p->padding[1],
                   p->dilation[1], &shape[3]));
    if (bias) {
        TRY(check_operand(slot, bias, "bias"));
        if (bias->ndim != 1 || bias->shape[0] != o) {
            char bs[128];
            return ly_set_error(LY_E_SHAPE,
                                "%s: bias: shape %s, expected [%lld] (one per output "
                                "channel) or NULL",
                                slot, ly_shape_str(bias, bs, sizeof bs), (long long)o);
        }
    }
    TRY(check_output_size(slot, 4, shape));
    set_output(out, n_out, 4, shape);
    if (residual) {
        TRY(check_operand(slot, residual, "residual"));
        TRY(ly_check_same_shape(&out[0], "the output", residual, "conv2d: residual"));
    }
    return LY_OK;
}

ly_status ly_contract_conv2d(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                             int *n_out)
{
    return contract_conv(ly_op_name(LY_OP_CONV2D), LY_F32, call, out, n_out);
}

/* in[4] the weight scales [O], in[5] and in[6] the input's calibrated range. */
ly_status ly_contract_conv2d_int8(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                  int *n_out)
{
    const char *slot = ly_op_name(LY_OP_CONV2D_INT8);
    TRY(contract_conv(slot, LY_I8, call, out, n_out));
    const ly_tensor *scale = call->in[4], *lo = call->in[5], *hi = call->in[6];
    int64_t o = call->in[1]->shape[0];
    TRY(check_operand(slot, scale, "weight scale"));
    if (scale->ndim != 1 || scale->shape[0] != o) {
        char ss[128];
        return ly_set_error(LY_E_SHAPE,
                            "%s: weight scale: shape %s, expected [%lld] (one per output channel)",
                            slot, ly_shape_str(scale, ss, sizeof ss), (long long)o);
    }
    const ly_tensor *range[2] = {lo, hi};
    const char *names[2] = {"input lo", "input hi"};
    for (int i = 0; i < 2; i++) {
        TRY(check_operand(slot, range[i], names[i]));
        if (ly_tensor_numel(range[i]) != 1)
            return ly_set_error(LY_E_SHAPE, "%s: %s: %lld elements, expected 1 (the calibrated %s)",
                                slot, names[i], (long long)ly_tensor_numel(range[i]),
                                i ? "maximum" : "minimum");
    }
    return LY_OK;
}

/* ---- pooling --------------------------------------------------------------------------- */

static ly_status infer_pool(const char *slot, const ly_kernel_call *call,
                            ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    TRY(check_call(slot, call, out, n_out));
    const ly_pool2d_params *p = call->params;
    const ly_tensor *x = call->in[0];
    TRY(check_operand(slot, x, "x"));
    TRY(check_ndim(slot, x, "x", 4, "([N, C, H, W])"));
    TRY(check_pair(slot, "kernel", p->kernel, 1, MAX_WINDOW_PARAM));
    TRY(check_pair(slot, "stride", p->stride, 1, MAX_WINDOW_PARAM));
    TRY(check_pair(slot, "padding", p->padding, 0, MAX_WINDOW_PARAM));
    /* As PyTorch: a window must always hold at least one real element. */
    for (int i = 0; i < 2; i++)
        if (p->padding[i] > p->kernel[i] / 2)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: params.padding (%lld, %lld), expected at most half of "
                                "params.kernel (%lld, %lld)",
                                slot, (long long)p->padding[0], (long long)p->padding[1],
                                (long long)p->kernel[0], (long long)p->kernel[1]);
    int64_t shape[4] = {x->shape[0], x->shape[1], 0, 0};
    TRY(out_extent(slot, "height", x->shape[2], p->kernel[0], p->stride[0], p->padding[0], 1,
                   &shape[2]));
    TRY(out_extent(slot, "width", x->shape[3], p->kernel[1], p->stride[1], p->padding[1], 1,
                   &shape[3]));
    TRY(check_output_size(slot, 4, shape));
    set_output(out, n_out, 4, shape);
    return LY_OK;
}

ly_status ly_contract_max_pool2d(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                 int *n_out)
{
    return infer_pool(ly_op_name(LY_OP_MAX_POOL2D), call, out, n_out);
}

ly_status ly_contract_avg_pool2d(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                 int *n_out)
{
    TRY(infer_pool(ly_op_name(LY_OP_AVG_POOL2D), call, out, n_out));
    int64_t cip = LY_PARAMS(call, ly_pool2d_params)->count_include_pad;
    if (cip != 0 && cip != 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.count_include_pad is %lld, expected 0 or 1",
                            ly_op_name(LY_OP_AVG_POOL2D), (long long)cip);
    return LY_OK;
}

/* ---- upsample ------------------------------------------------------------------ */

ly_status ly_contract_upsample_nearest2d(const ly_kernel_call *call,
                                         ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    const char *slot = ly_op_name(LY_OP_UPSAMPLE_NEAREST2D);
    TRY(check_call(slot, call, out, n_out));
    const ly_tensor *x = call->in[0];
    TRY(check_operand(slot, x, "x"));
    TRY(check_ndim(slot, x, "x", 4, "([N, C, H, W])"));
    int64_t s = LY_PARAMS(call, ly_upsample_nearest2d_params)->scale;
    if (s < 1 || s > MAX_SCALE)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params.scale is %lld, expected 1..%d", slot,
                            (long long)s, MAX_SCALE);
    int64_t shape[4] = {x->shape[0], x->shape[1], 0, 0}, numel;
    if (__builtin_mul_overflow(x->shape[2], s, &shape[2]) ||
        __builtin_mul_overflow(x->shape[3], s, &shape[3]) ||
        __builtin_mul_overflow(ly_tensor_numel(x), s * s, &numel) || numel > INT64_MAX / 8)
        return ly_set_error(LY_E_SHAPE, "%s: the output of x times %lld overflows", slot,
                            (long long)s);
    set_output(out, n_out, 4, shape);
    return LY_OK;
}

/* ---- elementwise, dfl ------------------------------------------------------------------- */

static ly_status infer_unary(const char *slot, const ly_kernel_call *call,
                             ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    TRY(check_call(slot, call, out, n_out));
    TRY(check_operand(slot, call->in[0], "x"));
    set_output(out, n_out, call->in[0]->ndim, call->in[0]->shape);
    return LY_OK;
}

ly_status ly_contract_silu(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                           int *n_out)
{
    return infer_unary(ly_op_name(LY_OP_SILU), call, out, n_out);
}

ly_status ly_contract_sigmoid(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                              int *n_out)
{
    return infer_unary(ly_op_name(LY_OP_SIGMOID), call, out, n_out);
}

ly_status ly_contract_dfl(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                          int *n_out)
{
    const char *slot = ly_op_name(LY_OP_DFL);
    TRY(check_call(slot, call, out, n_out));
    const ly_tensor *x = call->in[0];
    TRY(check_operand(slot, x, "x"));
    TRY(check_ndim(slot, x, "x", 3, "([N, 4 * bins, anchors])"));
    if (x->shape[1] < 4 || x->shape[1] % 4 != 0) {
        char buf[128];
        return ly_set_error(LY_E_SHAPE,
                            "%s: x: shape %s, expected dim 1 = 4 * bins with bins >= 1 (side-major "
                            "box logits)",
                            slot, ly_shape_str(x, buf, sizeof buf));
    }
    int64_t shape[3] = {x->shape[0], 4, x->shape[2]};
    set_output(out, n_out, 3, shape);
    return LY_OK;
}

/* The input's data is not read: only its shape, so a plan (or an exporter
 * folding it) needs none. */
ly_status ly_contract_anchor_grid(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                  int *n_out)
{
    const char *slot = ly_op_name(LY_OP_ANCHOR_GRID);
    TRY(check_call(slot, call, out, n_out));
    const ly_tensor *x = call->in[0];
    if (!x) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: x: tensor is NULL", slot);
    TRY(check_ndim(slot, x, "x", 4, "([N, C, H, W])"));
    double offset = LY_PARAMS(call, ly_anchor_grid_params)->offset;
    if (!isfinite(offset))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params.offset is %g, expected finite", slot,
                            offset);
    int64_t shape[3] = {1, 2, 0};
    if (__builtin_mul_overflow(x->shape[2], x->shape[3], &shape[2]))
        return ly_set_error(LY_E_SHAPE, "%s: the grid overflows", slot);
    TRY(check_output_size(slot, 3, shape));
    set_output(out, n_out, 3, shape);
    return LY_OK;
}

/* ---- resize ----------------------------------------------------------------------------- */

ly_status ly_contract_resize_bilinear2d(const ly_kernel_call *call,
                                        ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    const char *slot = ly_op_name(LY_OP_RESIZE_BILINEAR2D);
    TRY(check_call(slot, call, out, n_out));
    const ly_resize_bilinear2d_params *p = call->params;
    const ly_tensor *x = call->in[0];
    TRY(check_operand(slot, x, "x"));
    TRY(check_ndim(slot, x, "x", 4, "([N, C, H, W])"));
    TRY(check_pair(slot, "size", p->size, 1, MAX_WINDOW_PARAM));
    if ((p->align_corners != 0 && p->align_corners != 1) ||
        (p->half_pixel_centers != 0 && p->half_pixel_centers != 1))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.align_corners %lld and half_pixel_centers %lld, expected "
                            "0 or 1 each",
                            slot, (long long)p->align_corners, (long long)p->half_pixel_centers);
    if (p->align_corners && p->half_pixel_centers)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.align_corners and half_pixel_centers are both 1, expected "
                            "at most one (they define the source coordinate differently)",
                            slot);
    if (x->shape[2] < 1 || x->shape[3] < 1) {
        char buf[128];
        return ly_set_error(LY_E_SHAPE, "%s: x: shape %s, expected H and W of at least 1", slot,
                            ly_shape_str(x, buf, sizeof buf));
    }
    int64_t shape[4] = {x->shape[0], x->shape[1], p->size[0], p->size[1]};
    TRY(check_output_size(slot, 4, shape));
    set_output(out, n_out, 4, shape);
    return LY_OK;
}

LY_PARAMS_FIELDS(ly_conv2d_params, LY_FIELD_INT(ly_conv2d_params, stride, 2),
                 LY_FIELD_INT(ly_conv2d_params, padding, 2),
                 LY_FIELD_INT(ly_conv2d_params, dilation, 2),
                 LY_FIELD_INT(ly_conv2d_params, groups, 1),
                 LY_FIELD_INT(ly_conv2d_params, activation, 1),
                 LY_FIELD_DOUBLE(ly_conv2d_params, alpha, 1),
                 LY_FIELD_INT(ly_conv2d_params, post_affine, 1),
                 LY_FIELD_DOUBLE(ly_conv2d_params, post_scale, 1),
                 LY_FIELD_DOUBLE(ly_conv2d_params, post_shift, 1))
LY_PARAMS_FIELDS(ly_pool2d_params, LY_FIELD_INT(ly_pool2d_params, kernel, 2),
                 LY_FIELD_INT(ly_pool2d_params, stride, 2),
                 LY_FIELD_INT(ly_pool2d_params, padding, 2),
                 LY_FIELD_INT(ly_pool2d_params, count_include_pad, 1))
LY_PARAMS_FIELDS(ly_anchor_grid_params, LY_FIELD_DOUBLE(ly_anchor_grid_params, offset, 1))
LY_PARAMS_FIELDS(ly_upsample_nearest2d_params, LY_FIELD_INT(ly_upsample_nearest2d_params, scale, 1))
LY_PARAMS_FIELDS(ly_resize_bilinear2d_params, LY_FIELD_INT(ly_resize_bilinear2d_params, size, 2),
                 LY_FIELD_INT(ly_resize_bilinear2d_params, align_corners, 1),
                 LY_FIELD_INT(ly_resize_bilinear2d_params, half_pixel_centers, 1))
