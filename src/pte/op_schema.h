/* SPDX-License-Identifier: MIT */
/*
 * The portable operators an ExecuTorch program may call (KernelCall), one
 * table row each (op_schema.c): the operator's name and overload and its ATen
 * schema's arguments (their kinds) and out tensors. The exporter encodes its
 * calls through the row (ly_pte_call_*: an argument of the wrong kind fails
 * the export), and our runtime decodes and type-checks every call against the
 * same row before it looks at a value (ly_pte_call_check), so the two cannot
 * disagree about a schema.
 *
 * A call's arguments are EValue indices in ExecuTorch's emitter order: the
 * schema's arguments, its out tensors, then (optionally) the out tensors again
 * as the return values. An int[] (SymInt[]) is an IntList whose items are the
 * indices of Int values (ExecuTorch boxes them), never the ints themselves.
 */
#ifndef LY_PTE_OP_SCHEMA_H
#define LY_PTE_OP_SCHEMA_H

#include "pte/pte.h"

typedef enum ly_pte_arg_kind {
    LY_PTE_ARG_TENSOR,         /* Tensor */
    LY_PTE_ARG_OPT_TENSOR,     /* Tensor? (a Null value for None) */
    LY_PTE_ARG_TENSOR_LIST,    /* Tensor[] */
    LY_PTE_ARG_INT,            /* int, SymInt */
    LY_PTE_ARG_OPT_INT,        /* int?, SymInt?, MemoryFormat? */
    LY_PTE_ARG_INT_LIST,       /* int[], SymInt[] */
    LY_PTE_ARG_OPT_INT_LIST,   /* int[]?, SymInt[]? */
    LY_PTE_ARG_BOOL,           /* bool */
    LY_PTE_ARG_FLOAT,          /* float (a Double value) */
    LY_PTE_ARG_OPT_FLOAT_LIST, /* float[]? */
    LY_PTE_ARG_SCALAR,         /* Scalar (an Int or a Double value) */
    LY_PTE_ARG_KIND_COUNT
} ly_pte_arg_kind;

/* "Tensor", "int[]?", ... as the ATen schema spells the kind. */
const char *ly_pte_arg_kind_name(ly_pte_arg_kind kind);
/* Whether a value of EValue type `type` (ly_pte_evalue_type) is of `kind`. */
bool ly_pte_arg_kind_accepts(ly_pte_arg_kind kind, int type);

enum { LY_PTE_SCHEMA_MAX_ARGS = 8, LY_PTE_SCHEMA_MAX_OUTS = 3 };

typedef struct ly_pte_schema_arg {
    const char *name;
    ly_pte_arg_kind kind;
} ly_pte_schema_arg;

typedef struct ly_pte_op_schema {
    const char *name;     /* "aten::topk" */
    const char *overload; /* "values" */
    int n_args;
    ly_pte_schema_arg args[LY_PTE_SCHEMA_MAX_ARGS];
    int n_outs;
    const char *outs[LY_PTE_SCHEMA_MAX_OUTS]; /* Tensor(a!) each */
} ly_pte_op_schema;

/* Every portable operator a program may call, as our runtime runs them. */
typedef enum ly_pte_portable_op {
    LY_PTE_UPSAMPLE_NEAREST2D, /* aten::upsample_nearest2d.vec_out */
    LY_PTE_AVG_POOL2D,         /* aten::avg_pool2d.out */
    LY_PTE_ADD,                /* aten::add.out */
    LY_PTE_SUB,                /* aten::sub.out */
    LY_PTE_MUL,                /* aten::mul.out */
    LY_PTE_SIGMOID,            /* aten::sigmoid.out */
    LY_PTE_SILU,               /* aten::silu.out */
    LY_PTE_RELU,               /* aten::relu.out */
    LY_PTE_EXP,                /* aten::exp.out */
    LY_PTE_SIN,                /* aten::sin.out */
    LY_PTE_COS,                /* aten::cos.out */
    LY_PTE_VIEW_COPY,          /* aten::view_copy.out */
    LY_PTE_CLONE,              /* aten::clone.out */
    LY_PTE_TO_DIM_ORDER_COPY,  /* dim_order_ops::_to_dim_order_copy.out */
    LY_PTE_CAT,                /* aten::cat.out */
    LY_PTE_PERMUTE_COPY,       /* aten::permute_copy.out */
    LY_PTE_SOFTMAX,            /* aten::_softmax.out */
    LY_PTE_SLICE_COPY,         /* aten::slice_copy.Tensor_out */
    LY_PTE_NATIVE_LAYER_NORM,  /* aten::native_layer_norm.out */
    LY_PTE_TOPK,               /* aten::topk.values */
    LY_PTE_INDEX_SELECT,       /* aten::index_select.out */
    LY_PTE_MS_DEFORM_ATTN,     /* libreyolo::ms_deform_attn.out (docs/attention.md) */
    LY_PTE_GRID_SAMPLER_2D,    /* aten::grid_sampler_2d.out */
    LY_PTE_PORTABLE_COUNT
} ly_pte_portable_op;

extern const ly_pte_op_schema ly_pte_op_schemas[LY_PTE_PORTABLE_COUNT];

/* The operator named (name, overload); false when no row has it. */
bool ly_pte_op_find(const char *name, const char *overload, ly_pte_portable_op *op);

/* ---- decoding: a KernelCall's arguments checked against its row ------------------- */

/* Check `n` argument indices (each already a valid value index) against `s`:
 * their count (the args and outs, then optionally the outs again) and each
 * value's kind, given by type_of(values, index) (an ly_pte_evalue_type).
 * LY_E_UNSUPPORTED naming `what`, the argument and what was expected. */
ly_status ly_pte_call_check(const ly_pte_op_schema *s, const int32_t *args, size_t n,
                            int (*type_of)(const void *values, int32_t index), const void *values,
                            const char *what);
/* type_of for an array of ly_pte_evalue (a plan's values). */
int ly_pte_evalue_type_of(const void *values, int32_t index);

/* ---- encoding: a program's values and one KernelCall ------------------------------ */

/* A program's values as a writer adds them; the lists' items are owned here. */
typedef struct ly_pte_values {
    ly_pte_evalue *items;
    size_t n, cap;
    void **blocks;
    size_t n_blocks, cap_blocks;
} ly_pte_values;

/* Each returns the new value's index, or -1 when out of memory. */
int ly_pte_values_add(ly_pte_values *v, ly_pte_evalue e);
int ly_pte_values_null(ly_pte_values *v);
int ly_pte_values_int(ly_pte_values *v, int64_t i);
int ly_pte_values_bool(ly_pte_values *v, bool b);
int ly_pte_values_double(ly_pte_values *v, double d);
/* An IntList: an Int value per item, then the list of their indices. */
int ly_pte_values_int_list(ly_pte_values *v, int n, const int64_t *items);
int ly_pte_values_double_list(ly_pte_values *v, int n, const double *items);
void ly_pte_values_free(ly_pte_values *v);

/* One KernelCall under construction: the arguments are given in the
 * schema's order, each checked against its kind as it is added. */
typedef struct ly_pte_call {
    const ly_pte_op_schema *schema;
    ly_pte_values *values;
    int32_t args[LY_PTE_SCHEMA_MAX_ARGS + 2 * LY_PTE_SCHEMA_MAX_OUTS];
    int n_args, n_outs;
    ly_status status; /* the first failure; LY_OK so far */
} ly_pte_call;

void ly_pte_call_begin(ly_pte_call *c, ly_pte_portable_op op, ly_pte_values *values);
/* The next argument: an existing value (a tensor, a Null for None, ...). */
void ly_pte_call_value(ly_pte_call *c, int32_t value);
/* The next argument as a new value. */
void ly_pte_call_none(ly_pte_call *c);
void ly_pte_call_int(ly_pte_call *c, int64_t i);
void ly_pte_call_bool(ly_pte_call *c, bool b);
void ly_pte_call_double(ly_pte_call *c, double d);
void ly_pte_call_int_list(ly_pte_call *c, int n, const int64_t *items);
void ly_pte_call_double_list(ly_pte_call *c, int n, const double *items);
/* The next out tensor (after every argument). */
void ly_pte_call_out(ly_pte_call *c, int32_t tensor);
/* Every argument and out given: the instruction's argument list (the outs
 * twice, as ExecuTorch's emitter writes them) in c->args[0..*n). */
ly_status ly_pte_call_finish(ly_pte_call *c, size_t *n);

#endif
