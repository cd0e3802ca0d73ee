/* SPDX-License-Identifier: MIT */
/* The portable operators' schemas, checked when a call is written and when it is read (see
 * op_schema.h). */
#include "pte/op_schema.h"

#include "core/core.h"

#include <stdlib.h>
#include <string.h>

/* ---- the table -------------------------------------------------------------------- */

#define T LY_PTE_ARG_TENSOR
#define T_OPT LY_PTE_ARG_OPT_TENSOR
#define T_LIST LY_PTE_ARG_TENSOR_LIST
#define I LY_PTE_ARG_INT
#define I_OPT LY_PTE_ARG_OPT_INT
#define I_LIST LY_PTE_ARG_INT_LIST
#define I_LIST_OPT LY_PTE_ARG_OPT_INT_LIST
#define B LY_PTE_ARG_BOOL
#define F LY_PTE_ARG_FLOAT
#define F_LIST_OPT LY_PTE_ARG_OPT_FLOAT_LIST
#define SCALAR LY_PTE_ARG_SCALAR

/* The ATen schemas, "(arguments, *, outs)" as ExecuTorch's emitter fills them. */
const ly_pte_op_schema ly_pte_op_schemas[LY_PTE_PORTABLE_COUNT] = {
    /* upsample_nearest2d.vec_out(Tensor input, SymInt[]? output_size, float[]? scale_factors, *,
       Tensor(a!) out) */
    [LY_PTE_UPSAMPLE_NEAREST2D] = {"aten::upsample_nearest2d",
                                   "vec_out",
                                   3,
                                   {{"input", T},
                                    {"output_size", I_LIST_OPT},
                                    {"scale_factors", F_LIST_OPT}},
                                   1,
                                   {"out"}},
    /* avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool
     * ceil_mode, bool count_include_pad, int? divisor_override, *, Tensor(a!) out) */
    [LY_PTE_AVG_POOL2D] = {"aten::avg_pool2d",
                           "out",
                           7,
                           {{"self", T},
                            {"kernel_size", I_LIST},
                            {"stride", I_LIST},
                            {"padding", I_LIST},
                            {"ceil_mode", B},
                            {"count_include_pad", B},
                            {"divisor_override", I_OPT}},
                           1,
                           {"out"}},
    /* add.out(Tensor self, Tensor other, *, Scalar alpha, Tensor(a!) out); sub.out alike */
    [LY_PTE_ADD] =
        {"aten::add", "out", 3, {{"self", T}, {"other", T}, {"alpha", SCALAR}}, 1, {"out"}},
    [LY_PTE_SUB] =
        {"aten::sub", "out", 3, {{"self", T}, {"other", T}, {"alpha", SCALAR}}, 1, {"out"}},
    /* mul.out(Tensor self, Tensor other, *, Tensor(a!) out) */
    [LY_PTE_MUL] = {"aten::mul", "out", 2, {{"self", T}, {"other", T}}, 1, {"out"}},
    /* sigmoid.out(Tensor self, *, Tensor(a!) out); silu.out, relu.out alike */
    [LY_PTE_SIGMOID] = {"aten::sigmoid", "out", 1, {{"self", T}}, 1, {"out"}},
    [LY_PTE_SILU] = {"aten::silu", "out", 1, {{"self", T}}, 1, {"out"}},
    [LY_PTE_RELU] = {"aten::relu", "out", 1, {{"self", T}}, 1, {"out"}},
    [LY_PTE_EXP] = {"aten::exp", "out", 1, {{"self", T}}, 1, {"out"}},
    [LY_PTE_SIN] = {"aten::sin", "out", 1, {{"self", T}}, 1, {"out"}},
    [LY_PTE_COS] = {"aten::cos", "out", 1, {{"self", T}}, 1, {"out"}},
    /* view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out) */
    [LY_PTE_VIEW_COPY] = {"aten::view_copy", "out", 2, {{"self", T}, {"size", I_LIST}}, 1, {"out"}},
    /* clone.out(Tensor self, *, MemoryFormat? memory_format, Tensor(a!) out) */
    [LY_PTE_CLONE] = {"aten::clone", "out", 2, {{"self", T}, {"memory_format", I_OPT}}, 1, {"out"}},
    /* _to_dim_order_copy.out(Tensor self, *, bool non_blocking, int[]? dim_order, Tensor(a!) out)
     */
    [LY_PTE_TO_DIM_ORDER_COPY] = {"dim_order_ops::_to_dim_order_copy",
                                  "out",
                                  3,
                                  {{"self", T}, {"non_blocking", B}, {"dim_order", I_LIST_OPT}},
                                  1,
                                  {"out"}},
    /* cat.out(Tensor[] tensors, int dim, *, Tensor(a!) out) */
    [LY_PTE_CAT] = {"aten::cat", "out", 2, {{"tensors", T_LIST}, {"dim", I}}, 1, {"out"}},
    /* permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out) */
    [LY_PTE_PERMUTE_COPY] =
        {"aten::permute_copy", "out", 2, {{"self", T}, {"dims", I_LIST}}, 1, {"out"}},
    /* _softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) */
    [LY_PTE_SOFTMAX] =
        {"aten::_softmax", "out", 3, {{"self", T}, {"dim", I}, {"half_to_float", B}}, 1, {"out"}},
    /* slice_copy.Tensor_out(Tensor self, int dim, SymInt? start, SymInt? end, SymInt step, *,
     *                       Tensor(a!) out) */
    [LY_PTE_SLICE_COPY] = {"aten::slice_copy",
                           "Tensor_out",
                           5,
                           {{"self", T}, {"dim", I}, {"start", I_OPT}, {"end", I_OPT}, {"step", I}},
                           1,
                           {"out"}},
    /* native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
     *                       float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) */
    [LY_PTE_NATIVE_LAYER_NORM] = {"aten::native_layer_norm",
                                  "out",
                                  5,
                                  {{"input", T},
                                   {"normalized_shape", I_LIST},
                                   {"weight", T_OPT},
                                   {"bias", T_OPT},
                                   {"eps", F}},
                                  3,
                                  {"out0", "out1", "out2"}},
    /* topk.values(Tensor self, SymInt k, int dim, bool largest, bool sorted, *, Tensor(a!) values,
     *             Tensor(b!) indices) */
    [LY_PTE_TOPK] = {"aten::topk",
                     "values",
                     5,
                     {{"self", T}, {"k", I}, {"dim", I}, {"largest", B}, {"sorted", B}},
                     2,
                     {"values", "indices"}},
    /* index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out) */
    [LY_PTE_INDEX_SELECT] =
        {"aten::index_select", "out", 3, {{"self", T}, {"dim", I}, {"index", T}}, 1, {"out"}},
    /* libreyolo::ms_deform_attn.out(Tensor value, Tensor spatial_shapes, Tensor sampling_locations,
     *     Tensor attention_weights, Tensor? num_points, int mode, *, Tensor(a!) out) */
    [LY_PTE_MS_DEFORM_ATTN] = {"libreyolo::ms_deform_attn",
                               "out",
                               6,
                               {{"value", T},
                                {"spatial_shapes", T},
                                {"sampling_locations", T},
                                {"attention_weights", T},
                                {"num_points", T_OPT},
                                {"mode", I}},
                               1,
                               {"out"}},
    /* grid_sampler_2d.out(Tensor input, Tensor grid, int interpolation_mode,
     *                     int padding_mode, bool align_corners, *, Tensor(a!) out) */
    [LY_PTE_GRID_SAMPLER_2D] = {"aten::grid_sampler_2d",
                                "out",
                                5,
                                {{"input", T},
                                 {"grid", T},
                                 {"interpolation_mode", I},
                                 {"padding_mode", I},
                                 {"align_corners", B}},
                                1,
                                {"out"}},
};

bool ly_pte_op_find(const char *name, const char *overload, ly_pte_portable_op *op)
{
    if (!name) return false;
    for (int i = 0; i < LY_PTE_PORTABLE_COUNT; i++)
        if (strcmp(ly_pte_op_schemas[i].name, name) == 0 &&
            strcmp(ly_pte_op_schemas[i].overload, overload ? overload : "") == 0) {
            *op = (ly_pte_portable_op)i;
            return true;
        }
    return false;
}

/* ---- kinds -------------------------------------------------------------------------- */

const char *ly_pte_arg_kind_name(ly_pte_arg_kind kind)
{
    static const char *const names[LY_PTE_ARG_KIND_COUNT] = {
        [LY_PTE_ARG_TENSOR] = "Tensor",        [LY_PTE_ARG_OPT_TENSOR] = "Tensor?",
        [LY_PTE_ARG_TENSOR_LIST] = "Tensor[]", [LY_PTE_ARG_INT] = "int",
        [LY_PTE_ARG_OPT_INT] = "int?",         [LY_PTE_ARG_INT_LIST] = "int[]",
        [LY_PTE_ARG_OPT_INT_LIST] = "int[]?",  [LY_PTE_ARG_BOOL] = "bool",
        [LY_PTE_ARG_FLOAT] = "float",          [LY_PTE_ARG_OPT_FLOAT_LIST] = "float[]?",
        [LY_PTE_ARG_SCALAR] = "Scalar",
    };
    return (unsigned)kind < LY_PTE_ARG_KIND_COUNT ? names[kind] : "?";
}

bool ly_pte_arg_kind_accepts(ly_pte_arg_kind kind, int type)
{
    bool none = type == LY_PTE_EVALUE_NULL;
    switch (kind) {
    case LY_PTE_ARG_TENSOR:
        return type == LY_PTE_EVALUE_TENSOR;
    case LY_PTE_ARG_OPT_TENSOR:
        return none || type == LY_PTE_EVALUE_TENSOR;
    case LY_PTE_ARG_TENSOR_LIST:
        return type == LY_PTE_EVALUE_TENSOR_LIST;
    case LY_PTE_ARG_INT:
        return type == LY_PTE_EVALUE_INT;
    case LY_PTE_ARG_OPT_INT:
        return none || type == LY_PTE_EVALUE_INT;
    case LY_PTE_ARG_INT_LIST:
        return type == LY_PTE_EVALUE_INT_LIST;
    case LY_PTE_ARG_OPT_INT_LIST:
        return none || type == LY_PTE_EVALUE_INT_LIST;
    case LY_PTE_ARG_BOOL:
        return type == LY_PTE_EVALUE_BOOL;
    case LY_PTE_ARG_FLOAT:
        return type == LY_PTE_EVALUE_DOUBLE;
    case LY_PTE_ARG_OPT_FLOAT_LIST:
        return none || type == LY_PTE_EVALUE_DOUBLE_LIST;
    case LY_PTE_ARG_SCALAR:
        return type == LY_PTE_EVALUE_INT || type == LY_PTE_EVALUE_DOUBLE;
    case LY_PTE_ARG_KIND_COUNT:
        break;
    }
    return false;
}

static const char *evalue_type_name(int type)
{
    static const char *const names[] = {"no value",   "None",         "an Int",
                                        "a Bool",     "a Double",     "a Tensor",
                                        "a String",   "an IntList",   "a DoubleList",
                                        "a BoolList", "a TensorList", "an OptionalTensorList"};
    return type >= 0 && (size_t)type < sizeof names / sizeof names[0] ? names[type] : "no value";
}

/* ---- decoding ------------------------------------------------------------------------ */

int ly_pte_evalue_type_of(const void *values, int32_t index)
{
    return (int)((const ly_pte_evalue *)values)[index].type;
}

ly_status ly_pte_call_check(const ly_pte_op_schema *s, const int32_t *args, size_t n,
                            int (*type_of)(const void *values, int32_t index), const void *values,
                            const char *what)
{
    size_t base = (size_t)(s->n_args + s->n_outs);
    bool returns = n == base + (size_t)s->n_outs;
    for (int i = 0; returns && i < s->n_outs; i++)
        returns = args[base + (size_t)i] == args[(size_t)s->n_args + (size_t)i];
    if (n != base && !returns)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: %zu arguments, expected %zu (then the %d out tensor%s again as "
                            "return value%s)",
                            what, n, base, s->n_outs, s->n_outs > 1 ? "s" : "",
                            s->n_outs > 1 ? "s" : "");
    for (int i = 0; i < s->n_args + s->n_outs; i++) {
        bool out = i >= s->n_args;
        ly_pte_arg_kind kind = out ? LY_PTE_ARG_TENSOR : s->args[i].kind;
        int type = type_of(values, args[i]);
        if (ly_pte_arg_kind_accepts(kind, type)) continue;
        if (out)
            return ly_set_error(LY_E_UNSUPPORTED, "%s: out '%s' must be a Tensor, got %s", what,
                                s->outs[i - s->n_args], evalue_type_name(type));
        return ly_set_error(LY_E_UNSUPPORTED, "%s: argument '%s' must be %s, got %s", what,
                            s->args[i].name, ly_pte_arg_kind_name(kind), evalue_type_name(type));
    }
    return LY_OK;
}

/* ---- encoding ------------------------------------------------------------------------ */

int ly_pte_values_add(ly_pte_values *v, ly_pte_evalue e)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        ly_pte_evalue *p = realloc(v->items, cap * sizeof *p);
        if (!p) return -1;
        v->items = p;
        v->cap = cap;
    }
    v->items[v->n] = e;
    return (int)v->n++;
}

/* `bytes` of memory owned by the values (zeroed), NULL when out of memory. */
static void *own(ly_pte_values *v, size_t bytes)
{
    if (v->n_blocks == v->cap_blocks) {
        size_t cap = v->cap_blocks ? 2 * v->cap_blocks : 64;
        void **p = realloc(v->blocks, cap * sizeof *p);
        if (!p) return NULL;
        v->blocks = p;
        v->cap_blocks = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p) v->blocks[v->n_blocks++] = p;
    return p;
}

int ly_pte_values_null(ly_pte_values *v)
{
    return ly_pte_values_add(v, (ly_pte_evalue){.type = LY_PTE_EVALUE_NULL});
}

int ly_pte_values_int(ly_pte_values *v, int64_t i)
{
    ly_pte_evalue e = {.type = LY_PTE_EVALUE_INT};
    e.u.int_val = i;
    return ly_pte_values_add(v, e);
}

int ly_pte_values_bool(ly_pte_values *v, bool b)
{
    ly_pte_evalue e = {.type = LY_PTE_EVALUE_BOOL};
    e.u.bool_val = b;
    return ly_pte_values_add(v, e);
}

int ly_pte_values_double(ly_pte_values *v, double d)
{
    ly_pte_evalue e = {.type = LY_PTE_EVALUE_DOUBLE};
    e.u.double_val = d;
    return ly_pte_values_add(v, e);
}

int ly_pte_values_int_list(ly_pte_values *v, int n, const int64_t *items)
{
    int64_t *index = own(v, (size_t)n * sizeof *index);
    if (!index) return -1;
    for (int i = 0; i < n; i++)
        if ((index[i] = ly_pte_values_int(v, items[i])) < 0) return -1;
    ly_pte_evalue e = {.type = LY_PTE_EVALUE_INT_LIST};
    e.u.int_list.items = index;
    e.u.int_list.n_items = (size_t)n;
    return ly_pte_values_add(v, e);
}

int ly_pte_values_double_list(ly_pte_values *v, int n, const double *items)
{
    double *copy = own(v, (size_t)n * sizeof *copy);
    if (!copy) return -1;
    if (n > 0) memcpy(copy, items, (size_t)n * sizeof *copy);
    ly_pte_evalue e = {.type = LY_PTE_EVALUE_DOUBLE_LIST};
    e.u.double_list.items = copy;
    e.u.double_list.n_items = (size_t)n;
    return ly_pte_values_add(v, e);
}

void ly_pte_values_free(ly_pte_values *v)
{
    for (size_t i = 0; i < v->n_blocks; i++)
        free(v->blocks[i]);
    free(v->blocks);
    free(v->items);
    *v = (ly_pte_values){0};
}

void ly_pte_call_begin(ly_pte_call *c, ly_pte_portable_op op, ly_pte_values *values)
{
    *c = (ly_pte_call){.schema = &ly_pte_op_schemas[op], .values = values};
}

/* Append `value` as argument (or out) number n_args + n_outs, of the kind the schema says. */
static void append(ly_pte_call *c, int32_t value, bool out)
{
    const ly_pte_op_schema *s = c->schema;
    if (c->status != LY_OK) return;
    if (value < 0) {
        c->status = ly_set_error(LY_E_NO_MEMORY, "export: out of memory");
        return;
    }
    int at = c->n_args + c->n_outs;
    const char *name = NULL;
    ly_pte_arg_kind kind = LY_PTE_ARG_TENSOR;
    if (!out && c->n_outs == 0 && c->n_args < s->n_args) {
        name = s->args[c->n_args].name;
        kind = s->args[c->n_args].kind;
    } else if (out && c->n_args == s->n_args && c->n_outs < s->n_outs) {
        name = s->outs[c->n_outs];
    }
    int type = (size_t)value < c->values->n ? (int)c->values->items[value].type : -1;
    if (!name || !ly_pte_arg_kind_accepts(kind, type)) {
        c->status =
            ly_set_error(LY_E_INTERNAL, "export: %s.%s: %s %d is %s, the schema has %s", s->name,
                         s->overload, out ? "out" : "argument", at, evalue_type_name(type),
                         name  ? ly_pte_arg_kind_name(kind)
                         : out ? "no more outs"
                               : "no more arguments");
        return;
    }
    c->args[at] = value;
    if (out)
        c->n_outs++;
    else
        c->n_args++;
}

void ly_pte_call_value(ly_pte_call *c, int32_t value)
{
    append(c, value, false);
}

void ly_pte_call_none(ly_pte_call *c)
{
    if (c->status == LY_OK) append(c, ly_pte_values_null(c->values), false);
}

void ly_pte_call_int(ly_pte_call *c, int64_t i)
{
    if (c->status == LY_OK) append(c, ly_pte_values_int(c->values, i), false);
}

void ly_pte_call_bool(ly_pte_call *c, bool b)
{
    if (c->status == LY_OK) append(c, ly_pte_values_bool(c->values, b), false);
}

void ly_pte_call_double(ly_pte_call *c, double d)
{
    if (c->status == LY_OK) append(c, ly_pte_values_double(c->values, d), false);
}

void ly_pte_call_int_list(ly_pte_call *c, int n, const int64_t *items)
{
    if (c->status == LY_OK) append(c, ly_pte_values_int_list(c->values, n, items), false);
}

void ly_pte_call_double_list(ly_pte_call *c, int n, const double *items)
{
    if (c->status == LY_OK) append(c, ly_pte_values_double_list(c->values, n, items), false);
}

void ly_pte_call_out(ly_pte_call *c, int32_t tensor)
{
    append(c, tensor, true);
}

ly_status ly_pte_call_finish(ly_pte_call *c, size_t *n)
{
    const ly_pte_op_schema *s = c->schema;
    if (c->status != LY_OK) return c->status;
    if (c->n_args != s->n_args || c->n_outs != s->n_outs)
        return ly_set_error(LY_E_INTERNAL,
                            "export: %s.%s: %d arguments and %d outs given, the "
                            "schema has %d and %d",
                            s->name, s->overload, c->n_args, c->n_outs, s->n_args, s->n_outs);
    for (int i = 0; i < s->n_outs; i++)
        c->args[s->n_args + s->n_outs + i] = c->args[s->n_args + i];
    *n = (size_t)(s->n_args + 2 * s->n_outs);
    return LY_OK;
}
