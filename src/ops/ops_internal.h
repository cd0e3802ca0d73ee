/* SPDX-License-Identifier: MIT */
/*
 * What the manifest (include/libreyolo/ops.inc) gives the rest of the library:
 * one ly_op_def per op, with its contract, its reference, its parameters and
 * defaults, its parity rule and harness, and how the exporter lowers it.
 *
 * Each op's functions are named after it, so the manifest can refer to them:
 *   ly_contract_<name>  validates a call (operands, dtypes, params) and gives the
 *                       shapes and dtypes of its outputs, naming the op, the
 *                       operand and what was expected on failure;
 *   ly_ref_<name>       the portable reference, which defines the numbers (it may
 *                       assume the contract passed and params is not NULL);
 *   ly_cases_<check>    its parity cases (ops/cases.h), a set the check column
 *                       names: the op's own, or one its folder shares among
 *                       several ops.
 */
#ifndef LY_OPS_OPS_INTERNAL_H
#define LY_OPS_OPS_INTERNAL_H

#include "libreyolo/kernels.h"
#include "ops/cases.h"

#include <stddef.h>

typedef ly_status (*ly_contract_fn)(const ly_kernel_call *call,
                                    ly_tensor out[LY_KERNEL_MAX_OUTPUTS], int *n_out);

typedef enum ly_parity_kind {
    LY_PARITY_EXACT,     /* bit-identical */
    LY_PARITY_TOLERANCE, /* |impl - ref| <= tolerance * max(1, max |ref|) */
    LY_PARITY_GRAD       /* |impl - ref| <= tolerance, NaN only with NaN */
} ly_parity_kind;

typedef enum ly_lower_kind {
    LY_LOWER_NONE,     /* the exporter refuses it, naming the op */
    LY_LOWER_XNN,      /* XNNPACK nodes inside a partition */
    LY_LOWER_PORTABLE, /* a portable KernelCall between partitions */
    LY_LOWER_EITHER,   /* the lowering decides per call */
    LY_LOWER_FOLD      /* computed at export into a program constant */
} ly_lower_kind;

/* Which layouts a graph may hand the op (the manifest's layout column). */
typedef enum ly_layouts_rule {
    LY_LAYOUTS_PLAIN,      /* plain, or what its implementation's stateful form offers */
    LY_LAYOUTS_ELEMENTWISE /* element i from element i: in place, any layout its
                              full-size operands and output share */
} ly_layouts_rule;

typedef struct ly_op_def {
    const char *name;
    ly_contract_fn contract;
    ly_kernel_fn reference;
    size_t params_size;
    const void *defaults;
    const ly_case_set *cases; /* ly_cases_<check> */
    ly_parity_kind parity;
    double tolerance; /* 0 for EXACT */
    ly_lower_kind lower;
    ly_layouts_rule layouts;
} ly_op_def;

extern const ly_op_def ly_op_defs[LY_OP_COUNT];

/* The start of every contract: call, out and n_out given, and in[n_in..] NULL
 * (the op takes n_in operands; LY_KERNEL_MAX_INPUTS: no such check). */
ly_status ly_contract_operands(const char *op, const ly_kernel_call *call,
                               const ly_tensor out[LY_KERNEL_MAX_OUTPUTS], const int *n_out,
                               int n_in);

/* The id of the manifest op named `name`; false (no error set) for any other. */
bool ly_op_lookup(const char *name, ly_op *op);

/* NULL for an id out of range. */
static inline const ly_op_def *ly_op_def_of(ly_op op)
{
    return (unsigned)op < LY_OP_COUNT ? &ly_op_defs[op] : NULL;
}

#define LY_OP(ID, name, params, defaults, check, parity, export, layout)                           \
    ly_status ly_contract_##name(const ly_kernel_call *call, ly_tensor out[LY_KERNEL_MAX_OUTPUTS], \
                                 int *n_out);                                                      \
    ly_status ly_ref_##name(const ly_kernel_call *call);
#include "libreyolo/ops.inc"
#undef LY_OP

/* Each parameters struct's fields (ly_op_params), defined next to its op's
 * contract with LY_PARAMS_FIELDS. */
#define LY_OP(ID, name, params, defaults, check, parity, export, layout)                           \
    extern const ly_param_field ly_fields_##params[];                                              \
    extern const size_t ly_n_fields_##params;
#include "libreyolo/ops.inc"
#undef LY_OP

#define LY_FIELD_INT(type, field, n)                                                               \
    {                                                                                              \
#field, LY_PARAM_INT, n, offsetof(type, field)                                             \
    }
#define LY_FIELD_DOUBLE(type, field, n)                                                            \
    {                                                                                              \
#field, LY_PARAM_DOUBLE, n, offsetof(type, field)                                          \
    }
#define LY_PARAMS_FIELDS(type, ...)                                                                \
    const ly_param_field ly_fields_##type[] = {__VA_ARGS__};                                       \
    const size_t ly_n_fields_##type = sizeof ly_fields_##type / sizeof ly_fields_##type[0];

/* Each case set the check column names (ops/cases.h), defined in its op's
 * folder's cases.c; a set that serves several ops is declared once per op. */
#define LY_OP(ID, name, params, defaults, check, parity, export, layout)                           \
    extern const ly_case_set ly_cases_##check;
#include "libreyolo/ops.inc"
#undef LY_OP

#endif
