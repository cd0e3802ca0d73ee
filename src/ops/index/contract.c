/* SPDX-License-Identifier: MIT */
/*
 * Contracts of the index ops: gather (torch.gather), index_select, topk and
 * cumsum. Indices are i64; the values they select keep their dtype. Whether an
 * index is in range depends on the data, so the references check that.
 */
#include "core/core.h"
#include "ops/ops_internal.h"

#include <stdio.h>

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

/* f32 or i64 values. */
static ly_status check_values(const ly_tensor *t, const char *op, const char *name)
{
    return ly_check_operand(t, op, name, t && t->dtype == LY_I64 ? LY_I64 : LY_F32);
}

static ly_status resolve_axis(const char *op, int64_t axis, int ndim, int64_t *out)
{
    if (ndim < 1 || axis < -ndim || axis >= ndim)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.axis is %lld, expected -%d..%d for a %d-dim input", op,
                            (long long)axis, ndim, ndim > 0 ? ndim - 1 : 0, ndim);
    *out = axis < 0 ? axis + ndim : axis;
    return LY_OK;
}

static void set_output(ly_tensor *out, ly_dtype dtype, int ndim, const int64_t *shape)
{
    *out = (ly_tensor){.dtype = dtype, .ndim = ndim};
    for (int i = 0; i < ndim; i++)
        out->shape[i] = shape[i];
}

ly_status ly_contract_gather(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                             int *n_out)
{
    const char *op = ly_op_name(LY_OP_GATHER);
    TRY(ly_contract_operands(op, call, out, n_out, 2));
    const ly_tensor *x = call->in[0], *index = call->in[1];
    TRY(check_values(x, op, "x"));
    TRY(ly_check_operand(index, op, "index", LY_I64));
    int64_t axis = 0;
    TRY(resolve_axis(op, LY_PARAMS(call, ly_gather_params)->axis, x->ndim, &axis));
    bool fits = index->ndim == x->ndim;
    for (int d = 0; fits && d < x->ndim; d++)
        fits = d == axis || index->shape[d] <= x->shape[d];
    if (!fits) {
        char a[128], b[128];
        return ly_set_error(LY_E_SHAPE,
                            "%s: index %s, expected x's %d dims %s with each extent but axis "
                            "%lld at most x's",
                            op, ly_shape_str(index, a, sizeof a), x->ndim,
                            ly_shape_str(x, b, sizeof b), (long long)axis);
    }
    set_output(&out[0], x->dtype, index->ndim, index->shape);
    *n_out = 1;
    return LY_OK;
}

ly_status ly_contract_index_select(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                   int *n_out)
{
    const char *op = ly_op_name(LY_OP_INDEX_SELECT);
    TRY(ly_contract_operands(op, call, out, n_out, 2));
    const ly_tensor *x = call->in[0], *index = call->in[1];
    TRY(check_values(x, op, "x"));
    TRY(ly_check_operand(index, op, "index", LY_I64));
    int64_t axis = 0;
    TRY(resolve_axis(op, LY_PARAMS(call, ly_gather_params)->axis, x->ndim, &axis));
    if (index->ndim != 1) {
        char a[128];
        return ly_set_error(LY_E_SHAPE, "%s: index %s, expected 1 dim", op,
                            ly_shape_str(index, a, sizeof a));
    }
    int64_t per_image = LY_PARAMS(call, ly_gather_params)->per_image, images = 1;
    if (per_image < 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.per_image is %lld, expected 0 or the rows per image", op,
                            (long long)per_image);
    if (per_image) {
        images = index->shape[0] / per_image;
        if (axis != 1 || x->ndim < 2 || index->shape[0] % per_image != 0 || images < 1 ||
            (x->shape[0] != images && x->shape[0] != 1)) {
            char a[128], b[128];
            return ly_set_error(LY_E_SHAPE,
                                "%s: index %s, expected B runs of %lld rows (per_image) on axis 1 "
                                "of x [B or 1, ...] (x %s, axis %lld)",
                                op, ly_shape_str(index, a, sizeof a), (long long)per_image,
                                ly_shape_str(x, b, sizeof b), (long long)axis);
        }
    }
    int64_t shape[LY_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = d == axis ? index->shape[0] / images : x->shape[d];
    shape[0] = per_image ? images : shape[0];
    set_output(&out[0], x->dtype, x->ndim, shape);
    *n_out = 1;
    return LY_OK;
}

ly_status ly_contract_topk(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                           int *n_out)
{
    const char *op = ly_op_name(LY_OP_TOPK);
    TRY(ly_contract_operands(op, call, out, n_out, 1));
    const ly_tensor *x = call->in[0];
    TRY(ly_check_operand(x, op, "x", LY_F32));
    const ly_topk_params *p = call->params;
    int64_t axis = 0;
    TRY(resolve_axis(op, p->axis, x->ndim, &axis));
    if (p->k < 0 || p->k > x->shape[axis])
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.k is %lld, expected 0..%lld (the extent of axis %lld)", op,
                            (long long)p->k, (long long)x->shape[axis], (long long)axis);
    if (p->largest != 0 && p->largest != 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params.largest is %lld, expected 0 or 1",
                            op, (long long)p->largest);
    int64_t shape[LY_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = d == axis ? p->k : x->shape[d];
    set_output(&out[0], LY_F32, x->ndim, shape);
    set_output(&out[1], LY_I64, x->ndim, shape);
    *n_out = 2;
    return LY_OK;
}

ly_status ly_contract_cumsum(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                             int *n_out)
{
    const char *op = ly_op_name(LY_OP_CUMSUM);
    TRY(ly_contract_operands(op, call, out, n_out, 1));
    const ly_tensor *x = call->in[0];
    TRY(check_values(x, op, "x"));
    int64_t axis = 0;
    TRY(resolve_axis(op, LY_PARAMS(call, ly_axis_params)->axis, x->ndim, &axis));
    set_output(&out[0], x->dtype, x->ndim, x->shape);
    *n_out = 1;
    return LY_OK;
}

LY_PARAMS_FIELDS(ly_gather_params, LY_FIELD_INT(ly_gather_params, axis, 1),
                 LY_FIELD_INT(ly_gather_params, per_image, 1))
LY_PARAMS_FIELDS(ly_topk_params, LY_FIELD_INT(ly_topk_params, k, 1),
                 LY_FIELD_INT(ly_topk_params, axis, 1), LY_FIELD_INT(ly_topk_params, largest, 1))
LY_PARAMS_FIELDS(ly_axis_params, LY_FIELD_INT(ly_axis_params, axis, 1))
