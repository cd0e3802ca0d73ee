/* SPDX-License-Identifier: MIT */
/*
 * Contracts of the matrix products:
 *   linear  x [..., K], weight [N, K], bias [N] or NULL, residual [..., N] or NULL
 *           -> [..., N] = act(x·weightᵀ + bias) + residual
 *   matmul  a [..., M, K], b [..., K, N] (transpose_b: [..., N, K]) -> [..., M, N], the
 *           batch dimensions broadcast (NumPy rules), as torch.matmul on >= 2-d operands
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

ly_status ly_contract_linear(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                             int *n_out)
{
    const char *op = ly_op_name(LY_OP_LINEAR);
    TRY(ly_contract_operands(op, call, out, n_out, 4));
    const ly_tensor *x = call->in[0], *w = call->in[1], *b = call->in[2], *r = call->in[3];
    const ly_linear_params *p = LY_PARAMS(call, ly_linear_params);
    if (p->activation < LY_ACT_NONE || p->activation > LY_ACT_GELU)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.activation is %lld, expected an ly_activation (0 none, "
                            "1 silu, 2 sigmoid, 3 relu, 4 leaky relu, 5 gelu)",
                            op, (long long)p->activation);
    if (p->activation == LY_ACT_LEAKY_RELU && !isfinite(p->alpha))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.alpha is %g, expected a finite negative slope", op,
                            p->alpha);
    TRY(ly_check_operand(x, op, "x", LY_F32));
    TRY(ly_check_operand(w, op, "weight", LY_F32));
    char a[128], c[128];
    if (x->ndim < 1) return ly_set_error(LY_E_SHAPE, "%s: x is 0-d, expected [..., K]", op);
    if (w->ndim != 2 || w->shape[1] != x->shape[x->ndim - 1])
        return ly_set_error(LY_E_SHAPE, "%s: weight %s, expected [N, K] with K = %lld (x is %s)",
                            op, ly_shape_str(w, a, sizeof a), (long long)x->shape[x->ndim - 1],
                            ly_shape_str(x, c, sizeof c));
    if (b) {
        TRY(ly_check_operand(b, op, "bias", LY_F32));
        if (b->ndim != 1 || b->shape[0] != w->shape[0])
            return ly_set_error(LY_E_SHAPE, "%s: bias %s, expected [%lld] (one per output) or NULL",
                                op, ly_shape_str(b, a, sizeof a), (long long)w->shape[0]);
    }
    out[0] = *x;
    out[0].data = NULL;
    out[0].shape[x->ndim - 1] = w->shape[0];
    if (r) {
        TRY(ly_check_operand(r, op, "residual", LY_F32));
        bool same = r->ndim == out[0].ndim;
        for (int d = 0; same && d < r->ndim; d++)
            same = r->shape[d] == out[0].shape[d];
        if (!same)
            return ly_set_error(LY_E_SHAPE,
                                "%s: residual %s, expected the output's shape %s or NULL", op,
                                ly_shape_str(r, a, sizeof a), ly_shape_str(&out[0], c, sizeof c));
    }
    *n_out = 1;
    return LY_OK;
}

ly_status ly_contract_matmul(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS],
                             int *n_out)
{
    const char *op = ly_op_name(LY_OP_MATMUL);
    TRY(ly_contract_operands(op, call, out, n_out, 2));
    const ly_tensor *a = call->in[0], *b = call->in[1];
    TRY(ly_check_operand(a, op, "a", LY_F32));
    TRY(ly_check_operand(b, op, "b", LY_F32));
    int64_t tb = LY_PARAMS(call, ly_matmul_params)->transpose_b;
    if (tb != 0 && tb != 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: params.transpose_b is %lld, expected 0 or 1", op, (long long)tb);
    char sa[128], sb[128];
    if (a->ndim < 2 || b->ndim < 2)
        return ly_set_error(LY_E_SHAPE, "%s: a %s and b %s, expected at least 2 dims each", op,
                            ly_shape_str(a, sa, sizeof sa), ly_shape_str(b, sb, sizeof sb));
    int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
    int64_t bk = b->shape[b->ndim - (tb ? 1 : 2)], n = b->shape[b->ndim - (tb ? 2 : 1)];
    if (bk != k)
        return ly_set_error(LY_E_SHAPE, "%s: a %s and b %s: K %lld vs %lld (transpose_b %lld)", op,
                            ly_shape_str(a, sa, sizeof sa), ly_shape_str(b, sb, sizeof sb),
                            (long long)k, (long long)bk, (long long)tb);
    /* The batch dimensions broadcast. */
    ly_tensor batch_a = *a, batch_b = *b, batch;
    batch_a.ndim -= 2;
    batch_b.ndim -= 2;
    const ly_tensor *pair[2] = {&batch_a, &batch_b};
    static const char *const names[2] = {"a's batch dims", "b's batch dims"};
    TRY(ly_bcast_shape(op, 2, pair, names, &batch));
    out[0] = (ly_tensor){.dtype = LY_F32, .ndim = batch.ndim + 2};
    for (int d = 0; d < batch.ndim; d++)
        out[0].shape[d] = batch.shape[d];
    out[0].shape[batch.ndim] = m;
    out[0].shape[batch.ndim + 1] = n;
    *n_out = 1;
    return LY_OK;
}

LY_PARAMS_FIELDS(ly_linear_params, LY_FIELD_INT(ly_linear_params, activation, 1),
                 LY_FIELD_DOUBLE(ly_linear_params, alpha, 1))
LY_PARAMS_FIELDS(ly_matmul_params, LY_FIELD_INT(ly_matmul_params, transpose_b, 1))
