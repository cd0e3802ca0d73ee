/* SPDX-License-Identifier: MIT */
/*
 * Contracts of the shape ops: reshape, permute, slice and concat move elements
 * of any dtype without arithmetic (their outputs have the input's dtype).
 */
#include "core/core.h"
#include "ops/ops_internal.h"
#include "ops/shape/shape.h"

#include <stdio.h>

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

/* A tensor of any known dtype. */
static ly_status check_any(const ly_tensor *t, const char *op, const char *name)
{
    ly_dtype dtype = t && ly_dtype_size(t->dtype) ? t->dtype : LY_F32;
    return ly_check_operand(t, op, name, dtype);
}

static ly_status one_input(const char *op, const ly_kernel_call *call)
{
    TRY(check_any(call->in[0], op, "x"));
    for (int i = 1; i < LY_KERNEL_MAX_INPUTS; i++)
        if (call->in[i])
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: in[%d] is set, expected NULL (the op takes one operand)", op,
                                i);
    return LY_OK;
}

static void set_output(ly_tensor *out, int *n_out, ly_dtype dtype, int ndim, const int64_t *shape)
{
    out[0] = (ly_tensor){.dtype = dtype, .ndim = ndim};
    for (int i = 0; i < ndim; i++)
        out[0].shape[i] = shape[i];
    *n_out = 1;
}

/* An axis in -ndim..ndim-1, made non-negative. */
static ly_status resolve_axis(const char *op, int64_t axis, int ndim, int64_t *out)
{
    if (ndim < 1 || axis < -ndim || axis >= ndim)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.axis is %lld, expected -%d..%d for a %d-dim input", op,
                            (long long)axis, ndim, ndim > 0 ? ndim - 1 : 0, ndim);
    *out = axis < 0 ? axis + ndim : axis;
    return LY_OK;
}

ly_status ly_contract_reshape(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                              int *n_out)
{
    const char *op = ly_op_name(LY_OP_RESHAPE);
    TRY(ly_contract_operands(op, call, out, n_out, LY_KERNEL_MAX_INPUTS));
    TRY(one_input(op, call));
    const ly_reshape_params *p = call->params;
    if (p->ndim < 0 || p->ndim > LY_MAX_DIMS)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params.ndim is %lld, expected 0..%d", op,
                            (long long)p->ndim, LY_MAX_DIMS);
    const ly_tensor *x = call->in[0];
    int64_t known = 1, numel = ly_tensor_numel(x), shape[LY_MAX_DIMS];
    int free_axis = -1;
    for (int i = 0; i < p->ndim; i++) {
        shape[i] = p->shape[i];
        if (p->shape[i] == LY_RESHAPE_KEEP) {
            if (i >= x->ndim)
                return ly_set_error(LY_E_INVALID_ARGUMENT,
                                    "%s: params.shape[%d] keeps the input's extent, but x has "
                                    "%d dimensions",
                                    op, i, x->ndim);
            shape[i] = x->shape[i];
        }
        if (p->shape[i] == -1 && free_axis < 0) {
            free_axis = i;
            continue;
        }
        if (shape[i] < 0)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: params.shape[%d] is %lld, expected >= 0, one -1 or "
                                "LY_RESHAPE_KEEP",
                                op, i, (long long)p->shape[i]);
        if (__builtin_mul_overflow(known, shape[i], &known))
            return ly_set_error(LY_E_SHAPE, "%s: the asked shape overflows", op);
    }
    if (free_axis >= 0) shape[free_axis] = known > 0 && numel % known == 0 ? numel / known : -1;
    int64_t got = 1;
    for (int i = 0; i < p->ndim; i++)
        got = shape[i] < 0 ? -1 : got * shape[i];
    if (got != numel) {
        char a[128];
        return ly_set_error(LY_E_SHAPE,
                            "%s: cannot view x %s (%lld elements) as the %lld-d shape asked "
                            "(%s%lld elements)",
                            op, ly_shape_str(x, a, sizeof a), (long long)numel, (long long)p->ndim,
                            free_axis >= 0 ? "a multiple of " : "", (long long)known);
    }
    set_output(out, n_out, x->dtype, (int)p->ndim, shape);
    return LY_OK;
}

ly_status ly_contract_permute(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                              int *n_out)
{
    const char *op = ly_op_name(LY_OP_PERMUTE);
    TRY(ly_contract_operands(op, call, out, n_out, LY_KERNEL_MAX_INPUTS));
    TRY(one_input(op, call));
    const ly_permute_params *p = call->params;
    const ly_tensor *x = call->in[0];
    if (p->ndim != x->ndim)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.ndim is %lld, expected x's %d dimensions", op,
                            (long long)p->ndim, x->ndim);
    bool seen[LY_MAX_DIMS] = {false};
    int64_t shape[LY_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        int64_t a = p->perm[i];
        if (a < 0 || a >= x->ndim || seen[a])
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: params.perm[%d] is %lld, expected a permutation of 0..%d", op,
                                i, (long long)a, x->ndim - 1);
        seen[a] = true;
        shape[i] = x->shape[a];
    }
    set_output(out, n_out, x->dtype, x->ndim, shape);
    return LY_OK;
}

void ly_slice_resolve(const ly_slice_params *p, int64_t extent, int64_t *start, int64_t *count)
{
    int64_t b = p->start < 0 ? p->start + extent : p->start;
    int64_t e = p->end < 0 ? p->end + extent : p->end;
    b = b < 0 ? 0 : b > extent ? extent : b;
    e = e < 0 ? 0 : e > extent ? extent : e;
    *start = b;
    *count = e > b ? (e - b + p->step - 1) / p->step : 0;
}

ly_status ly_contract_slice(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                            int *n_out)
{
    const char *op = ly_op_name(LY_OP_SLICE);
    TRY(ly_contract_operands(op, call, out, n_out, LY_KERNEL_MAX_INPUTS));
    TRY(one_input(op, call));
    const ly_slice_params *p = call->params;
    const ly_tensor *x = call->in[0];
    int64_t axis = 0;
    TRY(resolve_axis(op, p->axis, x->ndim, &axis));
    if (p->step < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params.step is %lld, expected >= 1", op,
                            (long long)p->step);
    int64_t start, count, shape[LY_MAX_DIMS];
    ly_slice_resolve(p, x->shape[axis], &start, &count);
    for (int i = 0; i < x->ndim; i++)
        shape[i] = i == axis ? count : x->shape[i];
    set_output(out, n_out, x->dtype, x->ndim, shape);
    return LY_OK;
}

ly_status ly_contract_concat(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                             int *n_out)
{
    const char *op = ly_op_name(LY_OP_CONCAT);
    TRY(ly_contract_operands(op, call, out, n_out, LY_KERNEL_MAX_INPUTS));
    const ly_tensor *first = call->in[0];
    TRY(check_any(first, op, "in[0]"));
    int ndim = first->ndim;
    if (ndim < 1)
        return ly_set_error(LY_E_SHAPE, "%s: in[0]: 0-d tensor, expected at least 1 dim", op);
    int64_t axis = 0;
    TRY(resolve_axis(op, LY_PARAMS(call, ly_concat_params)->axis, ndim, &axis));
    int64_t shape[LY_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        shape[d] = first->shape[d];
    bool ended = false;
    for (int i = 1; i < LY_KERNEL_MAX_INPUTS; i++) {
        const ly_tensor *t = call->in[i];
        if (!t) {
            ended = true;
            continue;
        }
        if (ended)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: in[%d] follows a NULL input, expected the inputs packed from "
                                "in[0]",
                                op, i);
        char name[16], a[128], b[128];
        snprintf(name, sizeof name, "in[%d]", i);
        TRY(ly_check_operand(t, op, name, first->dtype));
        bool fits = t->ndim == ndim;
        for (int d = 0; fits && d < ndim; d++)
            fits = d == axis || t->shape[d] == first->shape[d] ||
                   (d == 0 && (t->shape[0] == 1 || shape[0] == 1));
        if (!fits)
            return ly_set_error(LY_E_SHAPE,
                                "%s: %s: shape %s, expected the shape of in[0] %s except on axis "
                                "%lld (and 1 or the batch on axis 0)",
                                op, name, ly_shape_str(t, a, sizeof a),
                                ly_shape_str(first, b, sizeof b), (long long)axis);
        if (axis != 0 && t->shape[0] > shape[0]) shape[0] = t->shape[0];
        if (__builtin_add_overflow(shape[axis], t->shape[axis], &shape[axis]))
            return ly_set_error(LY_E_SHAPE, "%s: the joined axis overflows", op);
    }
    set_output(out, n_out, first->dtype, ndim, shape);
    return LY_OK;
}

LY_PARAMS_FIELDS(ly_reshape_params, LY_FIELD_INT(ly_reshape_params, ndim, 1),
                 LY_FIELD_INT(ly_reshape_params, shape, LY_MAX_DIMS))
LY_PARAMS_FIELDS(ly_permute_params, LY_FIELD_INT(ly_permute_params, ndim, 1),
                 LY_FIELD_INT(ly_permute_params, perm, LY_MAX_DIMS))
LY_PARAMS_FIELDS(ly_slice_params, LY_FIELD_INT(ly_slice_params, axis, 1),
                 LY_FIELD_INT(ly_slice_params, start, 1), LY_FIELD_INT(ly_slice_params, end, 1),
                 LY_FIELD_INT(ly_slice_params, step, 1))
LY_PARAMS_FIELDS(ly_concat_params, LY_FIELD_INT(ly_concat_params, axis, 1))
