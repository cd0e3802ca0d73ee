/* SPDX-License-Identifier: MIT */
/*
 * Contracts of the normalisations:
 *   softmax     x (any shape), params.axis              -> [x shape]
 *   layer_norm  x [..., C], weight [C] or NULL, bias [C] or NULL, params.eps -> [x shape]
 *   rms_norm    x [..., C], scale [C] or NULL, params.eps                    -> [x shape]
 */
#include "core/core.h"
#include "ops/ops_internal.h"

#include <math.h>

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

static ly_status check_call(const char *op, const ly_kernel_call *call,
                            ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out, int n_in)
{
    ly_status st = ly_contract_operands(op, call, out, n_out, n_in);
    return st == LY_OK ? ly_check_operand(call->in[0], op, "x", LY_F32) : st;
}

static void output_like_x(const ly_kernel_call *call, ly_tensor *out, int *n_out)
{
    out[0] = *call->in[0];
    out[0].data = NULL;
    *n_out = 1;
}

ly_status ly_contract_softmax(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                              int *n_out)
{
    const char *op = ly_op_name(LY_OP_SOFTMAX);
    TRY(check_call(op, call, out, n_out, 1));
    int64_t axis = LY_PARAMS(call, ly_axis_params)->axis;
    int ndim = call->in[0]->ndim;
    if (ndim < 1 || axis < -ndim || axis >= ndim)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.axis is %lld, expected -%d..%d for a %d-dim input", op,
                            (long long)axis, ndim, ndim > 0 ? ndim - 1 : 0, ndim);
    output_like_x(call, out, n_out);
    return LY_OK;
}

/* x [..., C] and per-channel operands in[1..n) of [C] (each optional). */
static ly_status norm(ly_op op_id, const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                      int *n_out, int n_in, const char *const *names)
{
    const char *op = ly_op_name(op_id);
    TRY(check_call(op, call, out, n_out, n_in));
    const ly_tensor *x = call->in[0];
    if (x->ndim < 1) return ly_set_error(LY_E_SHAPE, "%s: x is 0-d, expected [..., C]", op);
    int64_t c = x->shape[x->ndim - 1];
    for (int i = 1; i < n_in; i++) {
        const ly_tensor *t = call->in[i];
        if (!t) continue;
        TRY(ly_check_operand(t, op, names[i], LY_F32));
        if (t->ndim != 1 || t->shape[0] != c) {
            char a[128];
            return ly_set_error(LY_E_SHAPE, "%s: %s %s, expected [%lld] (x's last extent) or NULL",
                                op, names[i], ly_shape_str(t, a, sizeof a), (long long)c);
        }
    }
    double eps = LY_PARAMS(call, ly_norm_params)->eps;
    if (!isfinite(eps) || eps < 0.0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: params.eps is %g, expected finite and >= 0",
                            op, eps);
    output_like_x(call, out, n_out);
    return LY_OK;
}

ly_status ly_contract_layer_norm(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                                 int *n_out)
{
    static const char *const names[3] = {"x", "weight", "bias"};
    return norm(LY_OP_LAYER_NORM, call, out, n_out, 3, names);
}

ly_status ly_contract_rms_norm(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                               int *n_out)
{
    static const char *const names[2] = {"x", "scale"};
    return norm(LY_OP_RMS_NORM, call, out, n_out, 2, names);
}

LY_PARAMS_FIELDS(ly_norm_params, LY_FIELD_DOUBLE(ly_norm_params, eps, 1))
