/* SPDX-License-Identifier: MIT */
/*
 * Contracts of the elementwise ops (libreyolo/ops.inc, elementwise section):
 * f32 operands of any shapes that broadcast (NumPy rules), the output having
 * the broadcast shape; where takes a u8 condition.
 */
#include "core/core.h"
#include "ops/elementwise/broadcast.h"
#include "ops/ops_internal.h"

#include <math.h>

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        ly_status try_status_ = (expr);                                                            \
        if (try_status_ != LY_OK) return try_status_;                                              \
    } while (0)

static ly_status none_after(const char *op, const ly_kernel_call *call, int first)
{
    for (int i = first; i < LY_KERNEL_MAX_INPUTS; i++)
        if (call->in[i])
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: in[%d] is set, expected NULL (the op "
                                "takes %d operand%s)",
                                op, i, first, first == 1 ? "" : "s");
    return LY_OK;
}

static ly_status output_like(ly_tensor *out, int *n_out, const ly_tensor *shape, ly_dtype dtype)
{
    out[0] = *shape;
    out[0].data = NULL;
    out[0].dtype = dtype;
    *n_out = 1;
    return LY_OK;
}

static ly_status binary(ly_op op, const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                        int *n_out)
{
    const char *name = ly_op_name(op);
    TRY(ly_contract_operands(name, call, out, n_out, LY_KERNEL_MAX_INPUTS));
    TRY(ly_check_operand(call->in[0], name, "a", LY_F32));
    TRY(ly_check_operand(call->in[1], name, "b", LY_F32));
    TRY(none_after(name, call, 2));
    static const char *const names[2] = {"a", "b"};
    ly_tensor shape;
    TRY(ly_bcast_shape(name, 2, (const ly_tensor *const *)call->in, names, &shape));
    return output_like(out, n_out, &shape, LY_F32);
}

#define BINARY_CONTRACT(ID, name)                                                                  \
    ly_status ly_contract_##name(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS], \
                                 int *n_out)                                                       \
    {                                                                                              \
        return binary(LY_OP_##ID, call, out, n_out);                                               \
    }

BINARY_CONTRACT(ADD, add)
BINARY_CONTRACT(SUB, sub)
BINARY_CONTRACT(MUL, mul)
BINARY_CONTRACT(DIV, div)
BINARY_CONTRACT(MAXIMUM, maximum)
BINARY_CONTRACT(MINIMUM, minimum)

ly_status ly_contract_where(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                            int *n_out)
{
    const char *name = ly_op_name(LY_OP_WHERE);
    TRY(ly_contract_operands(name, call, out, n_out, LY_KERNEL_MAX_INPUTS));
    TRY(ly_check_operand(call->in[0], name, "condition", LY_U8));
    TRY(ly_check_operand(call->in[1], name, "a", LY_F32));
    TRY(ly_check_operand(call->in[2], name, "b", LY_F32));
    TRY(none_after(name, call, 3));
    static const char *const names[3] = {"condition", "a", "b"};
    ly_tensor shape;
    TRY(ly_bcast_shape(name, 3, (const ly_tensor *const *)call->in, names, &shape));
    return output_like(out, n_out, &shape, LY_F32);
}

static ly_status unary(ly_op op, const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                       int *n_out)
{
    const char *name = ly_op_name(op);
    TRY(ly_contract_operands(name, call, out, n_out, LY_KERNEL_MAX_INPUTS));
    TRY(ly_check_operand(call->in[0], name, "x", LY_F32));
    TRY(none_after(name, call, 1));
    return output_like(out, n_out, call->in[0], LY_F32);
}

#define UNARY_CONTRACT(ID, name)                                                                   \
    ly_status ly_contract_##name(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS], \
                                 int *n_out)                                                       \
    {                                                                                              \
        return unary(LY_OP_##ID, call, out, n_out);                                                \
    }

UNARY_CONTRACT(RELU, relu)
UNARY_CONTRACT(GELU, gelu)
UNARY_CONTRACT(EXP, exp)
UNARY_CONTRACT(LOG, log)
UNARY_CONTRACT(SQRT, sqrt)
UNARY_CONTRACT(SIN, sin)
UNARY_CONTRACT(COS, cos)

ly_status ly_contract_clamp(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                            int *n_out)
{
    TRY(unary(LY_OP_CLAMP, call, out, n_out));
    const ly_clamp_params *p = call->params;
    if (isnan(p->min) || isnan(p->max) || p->min > p->max)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.min %g and params.max %g, expected min <= max (either may "
                            "be infinite)",
                            ly_op_name(LY_OP_CLAMP), p->min, p->max);
    return LY_OK;
}

LY_PARAMS_FIELDS(ly_clamp_params, LY_FIELD_DOUBLE(ly_clamp_params, min, 1),
                 LY_FIELD_DOUBLE(ly_clamp_params, max, 1))
