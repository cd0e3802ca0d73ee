/* SPDX-License-Identifier: MIT */
/* The op table, derived from the manifest (include/libreyolo/ops.inc). */
#include "core/core.h"
#include "ops/ops_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PARITY_EXACT LY_PARITY_EXACT, 0.0
#define PARITY_TOL(t) LY_PARITY_TOLERANCE, t
#define PARITY_GRAD(t) LY_PARITY_GRAD, t
#define PARITY(rule) PARITY_##rule

const ly_op_def ly_op_defs[LY_OP_COUNT] = {
#define LY_OP(ID, name, params, defaults, check, parity, export, layout)                           \
    [LY_OP_##ID] = {#name,          ly_contract_##name,      ly_ref_##name,                        \
                    sizeof(params), &(const params)defaults, &ly_cases_##check,                    \
                    PARITY(parity), LY_LOWER_##export,       LY_LAYOUTS_##layout},
#include "libreyolo/ops.inc"
#undef LY_OP
};

const char *ly_op_name(ly_op op)
{
    const ly_op_def *d = ly_op_def_of(op);
    return d ? d->name : NULL;
}

/* Names sorted once, for lookups by name (dispatch by slot name). */
static ly_op sorted[LY_OP_COUNT];
static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static int compare_ops(const void *a, const void *b)
{
    return strcmp(ly_op_defs[*(const ly_op *)a].name, ly_op_defs[*(const ly_op *)b].name);
}

static void sort_names(void)
{
    for (int i = 0; i < LY_OP_COUNT; i++)
        sorted[i] = (ly_op)i;
    qsort(sorted, LY_OP_COUNT, sizeof sorted[0], compare_ops);
}

bool ly_op_lookup(const char *name, ly_op *op)
{
    pthread_once(&sorted_once, sort_names);
    size_t lo = 0, hi = LY_OP_COUNT;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(name, ly_op_defs[sorted[mid]].name);
        if (c == 0) {
            *op = sorted[mid];
            return true;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return false;
}

ly_status ly_op_from_name(const char *name, ly_op *op)
{
    if (!name || !op) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_op_from_name: NULL argument");
    if (!ly_op_lookup(name, op))
        return ly_set_error(LY_E_NOT_FOUND, "no op named '%s' in the manifest", name);
    return LY_OK;
}

ly_status ly_contract_operands(const char *op, const ly_kernel_call *call,
                               const ly_tensor out[LY_KERNEL_MAX_OUTPUTS], const int *n_out,
                               int n_in)
{
    if (!call || !out || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call, out and n_out are required", op);
    for (int i = n_in; i < LY_KERNEL_MAX_INPUTS; i++)
        if (call->in[i])
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: in[%d] is set, expected NULL (the op takes %d operand%s)", op,
                                i, n_in, n_in == 1 ? "" : "s");
    return LY_OK;
}
