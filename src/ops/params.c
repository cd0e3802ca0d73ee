/* SPDX-License-Identifier: MIT */
/* ly_op_params(): the fields of each op's parameters struct (defined next to
 * its contract with LY_PARAMS_FIELDS). */
#include "core/core.h"
#include "ops/ops_internal.h"

/* Ops without parameters have no fields. */
const ly_param_field ly_fields_ly_no_params[1] = {{NULL, LY_PARAM_INT, 0, 0}};
const size_t ly_n_fields_ly_no_params = 0;

ly_status ly_op_params(ly_op op, const ly_param_field **fields, size_t *n_fields, size_t *size,
                       const void **defaults)
{
    static const struct {
        const ly_param_field *fields;
        const size_t *count;
    } tables[LY_OP_COUNT] = {
#define LY_OP(ID, name, params, defaults, check, parity, export, layout)                           \
    [LY_OP_##ID] = {ly_fields_##params, &ly_n_fields_##params},
#include "libreyolo/ops.inc"
#undef LY_OP
    };
    const ly_op_def *def = ly_op_def_of(op);
    if (!def)
        return ly_set_error(LY_E_NOT_FOUND, "ly_op_params: op %d is not in the manifest", (int)op);
    if (fields) *fields = tables[op].fields;
    if (n_fields) *n_fields = *tables[op].count;
    if (size) *size = def->params_size;
    if (defaults) *defaults = def->defaults;
    return LY_OK;
}
