/* SPDX-License-Identifier: MIT */
/* Reading `.pte` files: header and size checks, flatbuffer verification while the model is
 * built, then the checks ExecuTorch's Program::load, method_meta and Method::init make
 * (spec B1, B4). */
#include "core/core.h"
#include "pte/pte_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pte_owned {
    uint8_t *file;
    size_t file_size;
    ly_arena *arena;
} pte_owned;

/* ---- Tables ------------------------------------------------------------- */

static bool dec_tensor(dec *d, const fb_table *t, ly_pte_tensor *x)
{
    fb_reader *r = &d->r;
    uint8_t u8;
    uint32_t u32;
    fb_table sub;
    bool present;
    if (!fb_u8(r, t, 0, "scalar_type", 0, &u8)) return false;
    x->scalar_type = (int8_t)u8;
    if (!fb_u32(r, t, 1, "storage_offset", 0, &u32)) return false;
    x->storage_offset = (int32_t)u32;
    if (!READ_VEC(d, t, 2, "sizes", x->sizes, x->n_sizes)) return false;
    if (!READ_VEC(d, t, 3, "dim_order", x->dim_order, x->n_dim_order)) return false;
    if (!fb_u8(r, t, 4, "requires_grad", 0, &u8)) return false;
    x->requires_grad = u8 != 0;
    if (!fb_u32(r, t, 5, "data_buffer_idx", 0, &x->data_buffer_idx)) return false;
    if (!fb_sub(r, t, 6, "allocation_info", &sub, &present)) return false;
    if (present) {
        x->allocation_info.present = true;
        if (!fb_u32(r, &sub, 0, "allocation_info.memory_id", 0, &x->allocation_info.memory_id) ||
            !fb_u32(r, &sub, 1, "allocation_info.memory_offset_low", 0,
                    &x->allocation_info.memory_offset_low) ||
            !fb_u32(r, &sub, 2, "allocation_info.memory_offset_high", 0,
                    &x->allocation_info.memory_offset_high))
            return false;
    }
    if (!fb_u8(r, t, 7, "layout", 0, &u8)) return false;
    x->layout = (int8_t)u8;
    if (!fb_u8(r, t, 8, "shape_dynamism", 0, &x->shape_dynamism)) return false;
    if (!fb_sub(r, t, 9, "extra_tensor_info", &sub, &present)) return false;
    if (present) {
        ly_pte_extra_tensor_info *e = &x->extra_tensor_info;
        e->present = true;
        if (!fb_u64(r, &sub, 0, "extra_tensor_info.mutable_data_segments_idx", 0,
                    &e->mutable_data_segments_idx) ||
            !fb_str(r, &sub, 1, "extra_tensor_info.fully_qualified_name", &e->fully_qualified_name,
                    NULL) ||
            !fb_u8(r, &sub, 2, "extra_tensor_info.location", 0, &e->location))
            return false;
    }
    return true;
}

static const char *const evalue_names[] = {
    "NONE",   "Null",    "Int",        "Bool",     "Double",     "Tensor",
    "String", "IntList", "DoubleList", "BoolList", "TensorList", "OptionalTensorList"};

static bool dec_evalue(dec *d, const fb_table *t, void *item)
{
    ly_pte_evalue *v = item;
    fb_reader *r = &d->r;
    uint8_t type;
    fb_table val;
    bool present;
    if (!fb_u8(r, t, 0, "val_type", 0, &type)) return false;
    if (type == 0 || type > LY_PTE_EVALUE_OPTIONAL_TENSOR_LIST)
        return fb_fail(r, "val_type", "%u is not a KernelTypes member (expected 1..11)", type);
    v->type = (ly_pte_evalue_type)type;
    if (!fb_sub(r, t, 1, "val", &val, &present)) return false;
    if (!present) {
        if (type == LY_PTE_EVALUE_NULL) return true;
        return fb_fail(r, "val", "union type %s without a value", evalue_names[type]);
    }
    char name[32];
    snprintf(name, sizeof name, "(%s)", evalue_names[type]);
    size_t saved = fb_path_push(r, name, -1);
    bool ok = true;
    switch (v->type) {
    case LY_PTE_EVALUE_NONE:
    case LY_PTE_EVALUE_NULL:
        break;
    case LY_PTE_EVALUE_INT: {
        uint64_t x = 0;
        ok = fb_u64(r, &val, 0, "int_val", 0, &x);
        v->u.int_val = (int64_t)x;
        break;
    }
    case LY_PTE_EVALUE_BOOL: {
        uint8_t x = 0;
        ok = fb_u8(r, &val, 0, "bool_val", 0, &x);
        v->u.bool_val = x != 0;
        break;
    }
    case LY_PTE_EVALUE_DOUBLE:
        ok = fb_f64(r, &val, 0, "double_val", 0.0, &v->u.double_val);
        break;
    case LY_PTE_EVALUE_TENSOR:
        ok = dec_tensor(d, &val, &v->u.tensor);
        break;
    case LY_PTE_EVALUE_STRING:
        ok = fb_str(r, &val, 0, "string_val", &v->u.string_val, NULL);
        break;
    case LY_PTE_EVALUE_INT_LIST:
        ok = READ_VEC(d, &val, 0, "items", v->u.int_list.items, v->u.int_list.n_items);
        break;
    case LY_PTE_EVALUE_DOUBLE_LIST:
        ok = READ_VEC(d, &val, 0, "items", v->u.double_list.items, v->u.double_list.n_items);
        break;
    case LY_PTE_EVALUE_BOOL_LIST: {
        uint8_t *items;
        ok = READ_VEC(d, &val, 0, "items", items, v->u.bool_list.n_items);
        if (ok && items != EMPTY && items) {
            /* Any non-zero byte is true; normalise so the array is a valid bool[]. */
            bool *bools = (bool *)items;
            for (size_t i = 0; i < v->u.bool_list.n_items; i++)
                bools[i] = items[i] != 0;
        }
        v->u.bool_list.items = (const bool *)items;
        break;
    }
    case LY_PTE_EVALUE_TENSOR_LIST:
        ok = READ_VEC(d, &val, 0, "items", v->u.tensor_list.items, v->u.tensor_list.n_items);
        break;
    case LY_PTE_EVALUE_OPTIONAL_TENSOR_LIST:
        ok = READ_VEC(d, &val, 0, "items", v->u.optional_tensor_list.items,
                      v->u.optional_tensor_list.n_items);
        break;
    }
    if (ok) fb_path_pop(r, saved);
    return ok;
}

static const char *const instr_names[] = {"NONE",     "KernelCall",    "DelegateCall",
                                          "MoveCall", "JumpFalseCall", "FreeCall"};

static bool dec_instruction(dec *d, const fb_table *t, void *item)
{
    ly_pte_instruction *in = item;
    fb_reader *r = &d->r;
    uint8_t type;
    fb_table val;
    bool present;
    uint32_t a = 0, b = 0;
    if (!fb_u8(r, t, 0, "instr_args_type", 0, &type)) return false;
    if (type == 0 || type > LY_PTE_FREE_CALL)
        return fb_fail(r, "instr_args_type",
                       "%u is not an InstructionArguments member (expected 1..5)", type);
    in->type = (ly_pte_instruction_type)type;
    if (!fb_sub(r, t, 1, "instr_args", &val, &present)) return false;
    if (!present)
        return fb_fail(r, "instr_args", "union type %s without a value", instr_names[type]);
    char name[32];
    snprintf(name, sizeof name, "(%s)", instr_names[type]);
    size_t saved = fb_path_push(r, name, -1);
    bool ok = true;
    switch (in->type) {
    case LY_PTE_KERNEL_CALL:
        ok = fb_u32(r, &val, 0, "op_index", 0, &a) &&
             READ_VEC(d, &val, 1, "args", in->u.kernel_call.args, in->u.kernel_call.n_args);
        in->u.kernel_call.op_index = (int32_t)a;
        break;
    case LY_PTE_DELEGATE_CALL:
        ok = fb_u32(r, &val, 0, "delegate_index", 0, &a) &&
             READ_VEC(d, &val, 1, "args", in->u.delegate_call.args, in->u.delegate_call.n_args);
        in->u.delegate_call.delegate_index = (int32_t)a;
        break;
    case LY_PTE_MOVE_CALL:
        ok = fb_u32(r, &val, 0, "move_from", 0, &a) && fb_u32(r, &val, 1, "move_to", 0, &b);
        in->u.move_call.move_from = (int32_t)a;
        in->u.move_call.move_to = (int32_t)b;
        break;
    case LY_PTE_JUMP_FALSE_CALL:
        ok = fb_u32(r, &val, 0, "cond_value_index", 0, &a) &&
             fb_u32(r, &val, 1, "destination_instruction", 0, &b);
        in->u.jump_false_call.cond_value_index = (int32_t)a;
        in->u.jump_false_call.destination_instruction = (int32_t)b;
        break;
    case LY_PTE_FREE_CALL:
        ok = fb_u32(r, &val, 0, "value_index", 0, &a);
        in->u.free_call.value_index = (int32_t)a;
        break;
    case LY_PTE_INSTR_NONE:
        break;
    }
    if (ok) fb_path_pop(r, saved);
    return ok;
}

static bool dec_frame(dec *d, const fb_table *t, void *item)
{
    ly_pte_frame *f = item;
    uint32_t lineno = 0;
    bool ok = fb_str(&d->r, t, 0, "filename", &f->filename, NULL) &&
              fb_u32(&d->r, t, 1, "lineno", 0, &lineno) &&
              fb_str(&d->r, t, 2, "name", &f->name, NULL) &&
              fb_str(&d->r, t, 3, "context", &f->context, NULL);
    f->lineno = (int32_t)lineno;
    return ok;
}

static bool dec_frame_list(dec *d, const fb_table *t, void *item)
{
    ly_pte_frame_list *l = item;
    return READ_TABLES(d, t, 0, "items", l->items, l->n_items, dec_frame);
}

static bool dec_chain(dec *d, const fb_table *t, void *item)
{
    ly_pte_chain *c = item;
    return READ_VEC(d, t, 0, "inputs", c->inputs, c->n_inputs) &&
           READ_VEC(d, t, 1, "outputs", c->outputs, c->n_outputs) &&
           READ_TABLES(d, t, 2, "instructions", c->instructions, c->n_instructions,
                       dec_instruction) &&
           READ_TABLES(d, t, 3, "stacktrace", c->stacktrace, c->n_stacktrace, dec_frame_list);
}

static bool dec_operator(dec *d, const fb_table *t, void *item)
{
    ly_pte_operator *op = item;
    return fb_str(&d->r, t, 0, "name", &op->name, NULL) &&
           fb_str(&d->r, t, 1, "overload", &op->overload, NULL);
}

static bool dec_compile_spec(dec *d, const fb_table *t, void *item)
{
    ly_pte_compile_spec *cs = item;
    bool present;
    if (!fb_str(&d->r, t, 0, "key", &cs->key, NULL) ||
        !dec_bytes(d, t, 1, "value", &cs->value, &present))
        return false;
    if (!cs->key)
        return fb_fail(&d->r, "key", "missing (the runtime reads every compile spec key)");
    if (!present)
        return fb_fail(&d->r, "value", "missing (the runtime reads every compile spec value)");
    return true;
}

static bool dec_delegate(dec *d, const fb_table *t, void *item)
{
    ly_pte_delegate *dg = item;
    fb_table sub;
    bool present;
    if (!fb_str(&d->r, t, 0, "id", &dg->id, NULL)) return false;
    if (!fb_sub(&d->r, t, 1, "processed", &sub, &present)) return false;
    if (!present) return fb_fail(&d->r, "processed", "missing (where the delegate's data is)");
    if (!fb_u8(&d->r, &sub, 0, "processed.location", 0, &dg->location) ||
        !fb_u32(&d->r, &sub, 1, "processed.index", 0, &dg->index))
        return false;
    if (!READ_TABLES(d, t, 2, "compile_specs", dg->compile_specs, dg->n_compile_specs,
                     dec_compile_spec))
        return false;
    return true;
}

static bool dec_plan(dec *d, const fb_table *t, void *item)
{
    ly_pte_plan *pl = item;
    fb_table sub;
    bool present;
    if (!fb_str(&d->r, t, 0, "name", &pl->name, NULL)) return false;
    if (!fb_sub(&d->r, t, 1, "container_meta_type", &sub, &present)) return false;
    if (present) {
        pl->has_container_meta_type = true;
        if (!fb_str(&d->r, &sub, 0, "container_meta_type.encoded_inp_str", &pl->encoded_inp_str,
                    NULL) ||
            !fb_str(&d->r, &sub, 1, "container_meta_type.encoded_out_str", &pl->encoded_out_str,
                    NULL))
            return false;
    }
    return READ_TABLES(d, t, 2, "values", pl->values, pl->n_values, dec_evalue) &&
           READ_VEC(d, t, 3, "inputs", pl->inputs, pl->n_inputs) &&
           READ_VEC(d, t, 4, "outputs", pl->outputs, pl->n_outputs) &&
           READ_TABLES(d, t, 5, "chains", pl->chains, pl->n_chains, dec_chain) &&
           READ_TABLES(d, t, 6, "operators", pl->operators, pl->n_operators, dec_operator) &&
           READ_TABLES(d, t, 7, "delegates", pl->delegates, pl->n_delegates, dec_delegate) &&
           READ_VEC(d, t, 8, "non_const_buffer_sizes", pl->non_const_buffer_sizes,
                    pl->n_non_const_buffer_sizes);
}

static bool dec_byte_table(dec *d, const fb_table *t, void *item)
{
    bool present;
    if (!dec_bytes(d, t, 0, "", item, &present)) return false;
    if (!present) return fb_fail(&d->r, NULL, "data vector missing");
    return true;
}

static bool dec_segment(dec *d, const fb_table *t, void *item)
{
    ly_pte_data_segment *s = item;
    return fb_u64(&d->r, t, 0, "offset", 0, &s->offset) && fb_u64(&d->r, t, 1, "size", 0, &s->size);
}

static bool dec_subsegment(dec *d, const fb_table *t, void *item)
{
    ly_pte_subsegment_offsets *s = item;
    s->present = true;
    return fb_u32(&d->r, t, 0, "segment_index", 0, &s->segment_index) &&
           READ_VEC(d, t, 1, "offsets", s->offsets, s->n_offsets);
}

static bool dec_named(dec *d, const fb_table *t, void *item)
{
    ly_pte_named_data *nd = item;
    if (!fb_str(&d->r, t, 0, "key", &nd->key, NULL) ||
        !fb_u32(&d->r, t, 1, "segment_index", 0, &nd->segment_index))
        return false;
    if (!nd->key) return fb_fail(&d->r, "key", "missing");
    return true;
}

static bool dec_program(dec *d, ly_pte_program *p)
{
    fb_table root, sub;
    bool present;
    fb_reader *r = &d->r;
    if (!fb_root(r, &root)) return false;
    if (!fb_u32(r, &root, 0, "version", 0, &p->version)) return false;
    if (!READ_TABLES(d, &root, 1, "execution_plan", p->execution_plan, p->n_execution_plan,
                     dec_plan) ||
        !READ_TABLES(d, &root, 2, "constant_buffer", p->constant_buffer, p->n_constant_buffer,
                     dec_byte_table) ||
        !READ_TABLES(d, &root, 3, "backend_delegate_data", p->backend_delegate_data,
                     p->n_backend_delegate_data, dec_byte_table) ||
        !READ_TABLES(d, &root, 4, "segments", p->segments, p->n_segments, dec_segment))
        return false;
    if (!fb_sub(r, &root, 5, "constant_segment", &sub, &present)) return false;
    if (present) {
        size_t saved = fb_path_push(r, "constant_segment", -1);
        if (!dec_subsegment(d, &sub, &p->constant_segment)) return false;
        fb_path_pop(r, saved);
    }
    return READ_TABLES(d, &root, 6, "mutable_data_segments", p->mutable_data_segments,
                       p->n_mutable_data_segments, dec_subsegment) &&
           READ_TABLES(d, &root, 7, "named_data", p->named_data, p->n_named_data, dec_named);
}

/* ---- Validation ----------------------------------------------------------- */

static ly_status verr(ly_status st, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ly_status verr(ly_status st, const char *what, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ly_set_error(st, "%s: %s", what, msg);
}

static bool scalar_valid(int st)
{
    return ly_pte_scalar_size(st) != 0;
}

/* Program-level checks (validate_program): every plan. */
static ly_status validate_program(const ly_pte_program *p, const char *what)
{
    if (!p->execution_plan) return verr(LY_E_FORMAT, what, "execution_plan: missing");
    for (size_t k = 0; k < p->n_execution_plan; k++) {
        const ly_pte_plan *pl = &p->execution_plan[k];
        if (!pl->values) return verr(LY_E_FORMAT, what, "execution_plan[%zu].values: missing", k);
        for (size_t i = 0; i < pl->n_values; i++) {
            const ly_pte_evalue *v = &pl->values[i];
            if (v->type == LY_PTE_EVALUE_TENSOR) {
                const ly_pte_tensor *t = &v->u.tensor;
                if (!t->sizes)
                    return verr(LY_E_FORMAT, what,
                                "execution_plan[%zu].values[%zu](Tensor).sizes: missing", k, i);
                for (size_t j = 0; j < t->n_sizes; j++)
                    if (t->sizes[j] < 0)
                        return verr(LY_E_FORMAT, what,
                                    "execution_plan[%zu].values[%zu](Tensor).sizes[%zu]: "
                                    "negative size %d",
                                    k, i, j, (int)t->sizes[j]);
                if (!scalar_valid(t->scalar_type))
                    return verr(LY_E_FORMAT, what,
                                "execution_plan[%zu].values[%zu](Tensor).scalar_type: %d is not "
                                "a ScalarType",
                                k, i, t->scalar_type);
            } else if (v->type == LY_PTE_EVALUE_TENSOR_LIST ||
                       v->type == LY_PTE_EVALUE_OPTIONAL_TENSOR_LIST) {
                bool optional = v->type == LY_PTE_EVALUE_OPTIONAL_TENSOR_LIST;
                const int32_t *items =
                    optional ? v->u.optional_tensor_list.items : v->u.tensor_list.items;
                size_t n = optional ? v->u.optional_tensor_list.n_items : v->u.tensor_list.n_items;
                if (!items)
                    return verr(LY_E_FORMAT, what, "execution_plan[%zu].values[%zu].items: missing",
                                k, i);
                for (size_t j = 0; j < n; j++) {
                    int32_t ix = items[j];
                    if (optional && ix == -1) continue;
                    if (ix < 0 || (size_t)ix >= pl->n_values ||
                        pl->values[ix].type != LY_PTE_EVALUE_TENSOR)
                        return verr(LY_E_FORMAT, what,
                                    "execution_plan[%zu].values[%zu].items[%zu]: %d is not the "
                                    "index of a Tensor value (%zu values)",
                                    k, i, j, (int)ix, pl->n_values);
                }
            }
        }
    }
    if (p->constant_segment.present && p->constant_segment.n_offsets > 1) {
        if (p->n_constant_buffer)
            return verr(LY_E_FORMAT, what,
                        "constant_buffer: has %zu entries; it must be empty when "
                        "constant_segment is used",
                        p->n_constant_buffer);
        if (p->constant_segment.segment_index >= p->n_segments)
            return verr(LY_E_FORMAT, what,
                        "constant_segment.segment_index: %u is out of range (%zu segments)",
                        p->constant_segment.segment_index, p->n_segments);
    }
    for (size_t i = 0; i < p->n_mutable_data_segments; i++)
        if (p->mutable_data_segments[i].segment_index >= p->n_segments)
            return verr(LY_E_FORMAT, what,
                        "mutable_data_segments[%zu].segment_index: %u is out of range (%zu "
                        "segments)",
                        i, p->mutable_data_segments[i].segment_index, p->n_segments);
    for (size_t i = 0; i < p->n_named_data; i++)
        if (p->named_data[i].segment_index >= p->n_segments)
            return verr(LY_E_FORMAT, what,
                        "named_data[%zu] (\"%s\").segment_index: %u is out of range (%zu "
                        "segments)",
                        i, p->named_data[i].key, p->named_data[i].segment_index, p->n_segments);
    return LY_OK;
}

static ly_status check_index(const char *what, const char *field, size_t k, int32_t ix, size_t n,
                             const char *of)
{
    if (ix < 0 || (size_t)ix >= n)
        return verr(LY_E_FORMAT, what, "execution_plan[%zu].%s: %d is out of range (%zu %s)", k,
                    field, (int)ix, n, of);
    return LY_OK;
}

/* Where a tensor's data comes from, checked as Method::init / the tensor parser do. */
static ly_status validate_tensor(const ly_pte_program *p, const ly_pte_plan *pl, size_t k, size_t i,
                                 const ly_pte_tensor *t, const char *what)
{
    char field[96];
    snprintf(field, sizeof field, "execution_plan[%zu].values[%zu](Tensor)", k, i);
    if (t->storage_offset != 0)
        return verr(LY_E_FORMAT, what, "%s.storage_offset: %d, expected 0", field,
                    (int)t->storage_offset);
    if (t->shape_dynamism > LY_PTE_DYNAMIC_UNBOUND)
        return verr(LY_E_FORMAT, what, "%s.shape_dynamism: %u is not a TensorShapeDynamism", field,
                    t->shape_dynamism);
    if (t->shape_dynamism == LY_PTE_DYNAMIC_UNBOUND)
        return verr(LY_E_UNSUPPORTED, what,
                    "%s.shape_dynamism: DYNAMIC_UNBOUND tensors are not supported by the "
                    "portable runtime",
                    field);
    if (!t->dim_order) return verr(LY_E_FORMAT, what, "%s.dim_order: missing", field);
    if (t->n_dim_order != t->n_sizes)
        return verr(LY_E_FORMAT, what, "%s.dim_order: %zu entries for %zu sizes (must be equal)",
                    field, t->n_dim_order, t->n_sizes);
    if (t->n_sizes > LY_PTE_MAX_RANK)
        return verr(LY_E_FORMAT, what, "%s.sizes: rank %zu exceeds the limit of %d", field,
                    t->n_sizes, LY_PTE_MAX_RANK);
    unsigned seen = 0;
    for (size_t j = 0; j < t->n_dim_order; j++) {
        unsigned dj = t->dim_order[j];
        if (dj >= t->n_sizes || (seen >> dj) & 1u)
            return verr(LY_E_FORMAT, what,
                        "%s.dim_order: not a permutation of 0..%zu (entry %zu is %u)", field,
                        t->n_sizes - 1, j, dj);
        seen |= 1u << dj;
    }
    uint64_t nbytes = 0;
    if (ly_pte_tensor_nbytes(t, &nbytes) != LY_OK)
        return verr(LY_E_FORMAT, what, "%s.sizes: the tensor's byte size overflows", field);
    if (t->extra_tensor_info.present && t->extra_tensor_info.location == 1)
        return verr(LY_E_UNSUPPORTED, what,
                    "%s.extra_tensor_info.location: EXTERNAL (data in a separate .ptd file, key "
                    "\"%s\") is not supported",
                    field,
                    t->extra_tensor_info.fully_qualified_name
                        ? t->extra_tensor_info.fully_qualified_name
                        : "");
    if (t->extra_tensor_info.present && t->extra_tensor_info.location > 1)
        return verr(LY_E_FORMAT, what,
                    "%s.extra_tensor_info.location: %u is not a "
                    "TensorDataLocation",
                    field, t->extra_tensor_info.location);

    if (t->allocation_info.present) {
        uint32_t id = t->allocation_info.memory_id;
        size_t planned = pl->n_non_const_buffer_sizes ? pl->n_non_const_buffer_sizes - 1 : 0;
        if (id == 0 || id - 1 >= planned)
            return verr(LY_E_FORMAT, what,
                        "%s.allocation_info.memory_id: %u is not a planned buffer (1..%zu)", field,
                        id, planned);
        int64_t buf = pl->non_const_buffer_sizes[id];
        uint64_t off = ly_pte_memory_offset(&t->allocation_info);
        if (buf < 0 || !ly_pte_range_within(off, nbytes, (uint64_t)buf))
            return verr(LY_E_FORMAT, what,
                        "%s.allocation_info: %llu bytes at offset %llu do not fit planned buffer "
                        "%u of %lld bytes",
                        field, (unsigned long long)nbytes, (unsigned long long)off, id,
                        (long long)buf);
        if (t->data_buffer_idx > 0) { /* planned, with its initial value in a mutable segment */
            uint64_t m =
                t->extra_tensor_info.present ? t->extra_tensor_info.mutable_data_segments_idx : 0;
            if (m >= p->n_mutable_data_segments)
                return verr(LY_E_FORMAT, what,
                            "%s: initial data in mutable_data_segments[%llu], but the program "
                            "has %zu",
                            field, (unsigned long long)m, p->n_mutable_data_segments);
            const ly_pte_subsegment_offsets *ms = &p->mutable_data_segments[m];
            if (t->data_buffer_idx >= ms->n_offsets)
                return verr(LY_E_FORMAT, what,
                            "%s.data_buffer_idx: %u is out of range (%zu mutable offsets)", field,
                            t->data_buffer_idx, ms->n_offsets);
            uint64_t so = ms->offsets[t->data_buffer_idx];
            uint64_t ss = p->segment_data[ms->segment_index].size;
            if (!ly_pte_range_within(so, nbytes, ss))
                return verr(LY_E_FORMAT, what,
                            "%s: %llu bytes at offset %llu run past mutable segment %u (%llu "
                            "bytes)",
                            field, (unsigned long long)nbytes, (unsigned long long)so,
                            ms->segment_index, (unsigned long long)ss);
        }
    } else if (t->data_buffer_idx > 0) {
        ly_pte_bytes data;
        ly_status st = ly_pte_constant_data(p, t, &data);
        if (st != LY_OK) return verr(st, what, "%s: %s", field, ly_last_error());
    }
    return LY_OK;
}

/* The checks of method_meta / Method::init for the plan that will run. */
static ly_status validate_method(const ly_pte_program *p, size_t k, const char *what)
{
    const ly_pte_plan *pl = &p->execution_plan[k];
    ly_status st;
    if (!pl->non_const_buffer_sizes)
        return verr(LY_E_FORMAT, what, "execution_plan[%zu].non_const_buffer_sizes: missing", k);
    if (!pl->inputs) return verr(LY_E_FORMAT, what, "execution_plan[%zu].inputs: missing", k);
    if (!pl->outputs) return verr(LY_E_FORMAT, what, "execution_plan[%zu].outputs: missing", k);
    for (size_t j = 1; j < pl->n_non_const_buffer_sizes; j++)
        if (pl->non_const_buffer_sizes[j] < 0)
            return verr(LY_E_FORMAT, what,
                        "execution_plan[%zu].non_const_buffer_sizes[%zu]: negative size %lld", k, j,
                        (long long)pl->non_const_buffer_sizes[j]);
    char field[160];
    for (size_t i = 0; i < pl->n_inputs; i++) {
        snprintf(field, sizeof field, "inputs[%zu]", i);
        if ((st = check_index(what, field, k, pl->inputs[i], pl->n_values, "values"))) return st;
    }
    for (size_t i = 0; i < pl->n_outputs; i++) {
        snprintf(field, sizeof field, "outputs[%zu]", i);
        if ((st = check_index(what, field, k, pl->outputs[i], pl->n_values, "values"))) return st;
    }
    for (size_t i = 0; i < pl->n_values; i++) {
        const ly_pte_evalue *v = &pl->values[i];
        if (v->type == LY_PTE_EVALUE_TENSOR) {
            if ((st = validate_tensor(p, pl, k, i, &v->u.tensor, what))) return st;
        } else if (v->type == LY_PTE_EVALUE_STRING && !v->u.string_val) {
            return verr(LY_E_FORMAT, what,
                        "execution_plan[%zu].values[%zu](String).string_val: missing", k, i);
        } else if ((v->type == LY_PTE_EVALUE_INT_LIST && !v->u.int_list.items) ||
                   (v->type == LY_PTE_EVALUE_DOUBLE_LIST && !v->u.double_list.items) ||
                   (v->type == LY_PTE_EVALUE_BOOL_LIST && !v->u.bool_list.items)) {
            return verr(LY_E_FORMAT, what, "execution_plan[%zu].values[%zu].items: missing", k, i);
        }
    }
    if (!pl->operators) return verr(LY_E_FORMAT, what, "execution_plan[%zu].operators: missing", k);
    for (size_t i = 0; i < pl->n_operators; i++)
        if (!pl->operators[i].name)
            return verr(LY_E_FORMAT, what, "execution_plan[%zu].operators[%zu].name: missing", k,
                        i);
    if (!pl->delegates) return verr(LY_E_FORMAT, what, "execution_plan[%zu].delegates: missing", k);
    for (size_t i = 0; i < pl->n_delegates; i++) {
        const ly_pte_delegate *dg = &pl->delegates[i];
        if (!dg->id)
            return verr(LY_E_FORMAT, what, "execution_plan[%zu].delegates[%zu].id: missing", k, i);
        if (!dg->compile_specs)
            return verr(LY_E_FORMAT, what,
                        "execution_plan[%zu].delegates[%zu].compile_specs: missing (must be "
                        "present, even empty)",
                        k, i);
        if (dg->location == LY_PTE_INLINE) {
            if (dg->index >= p->n_backend_delegate_data)
                return verr(LY_E_FORMAT, what,
                            "execution_plan[%zu].delegates[%zu].processed.index: %u is out of "
                            "range (%zu inline delegate blobs)",
                            k, i, dg->index, p->n_backend_delegate_data);
        } else if (dg->location == LY_PTE_SEGMENT) {
            if (dg->index >= p->n_segments)
                return verr(LY_E_FORMAT, what,
                            "execution_plan[%zu].delegates[%zu].processed.index: %u is out of "
                            "range (%zu segments)",
                            k, i, dg->index, p->n_segments);
        } else {
            return verr(LY_E_FORMAT, what,
                        "execution_plan[%zu].delegates[%zu].processed.location: %u is not a "
                        "DataLocation (0 INLINE, 1 SEGMENT)",
                        k, i, dg->location);
        }
    }
    if (!pl->chains || pl->n_chains == 0)
        return verr(LY_E_FORMAT, what, "execution_plan[%zu].chains: %s", k,
                    pl->chains ? "empty (a method needs at least one chain)" : "missing");
    for (size_t c = 0; c < pl->n_chains; c++) {
        const ly_pte_chain *ch = &pl->chains[c];
        if (!ch->instructions)
            return verr(LY_E_FORMAT, what, "execution_plan[%zu].chains[%zu].instructions: missing",
                        k, c);
        for (size_t j = 0; j < ch->n_instructions; j++) {
            const ly_pte_instruction *in = &ch->instructions[j];
            const int32_t *args = NULL;
            size_t n_args = 0;
            char at[64];
            snprintf(at, sizeof at, "chains[%zu].instructions[%zu]", c, j);
            switch (in->type) {
            case LY_PTE_KERNEL_CALL:
                snprintf(field, sizeof field, "%s(KernelCall).op_index", at);
                if ((st = check_index(what, field, k, in->u.kernel_call.op_index, pl->n_operators,
                                      "operators")))
                    return st;
                args = in->u.kernel_call.args;
                n_args = in->u.kernel_call.n_args;
                break;
            case LY_PTE_DELEGATE_CALL:
                snprintf(field, sizeof field, "%s(DelegateCall).delegate_index", at);
                if ((st = check_index(what, field, k, in->u.delegate_call.delegate_index,
                                      pl->n_delegates, "delegates")))
                    return st;
                args = in->u.delegate_call.args;
                n_args = in->u.delegate_call.n_args;
                break;
            case LY_PTE_MOVE_CALL:
                snprintf(field, sizeof field, "%s(MoveCall).move_from", at);
                if ((st = check_index(what, field, k, in->u.move_call.move_from, pl->n_values,
                                      "values")))
                    return st;
                snprintf(field, sizeof field, "%s(MoveCall).move_to", at);
                if ((st = check_index(what, field, k, in->u.move_call.move_to, pl->n_values,
                                      "values")))
                    return st;
                break;
            case LY_PTE_JUMP_FALSE_CALL:
                snprintf(field, sizeof field, "%s(JumpFalseCall).cond_value_index", at);
                if ((st = check_index(what, field, k, in->u.jump_false_call.cond_value_index,
                                      pl->n_values, "values")))
                    return st;
                snprintf(field, sizeof field, "%s(JumpFalseCall).destination_instruction", at);
                if ((st = check_index(what, field, k, in->u.jump_false_call.destination_instruction,
                                      ch->n_instructions, "instructions")))
                    return st;
                break;
            case LY_PTE_FREE_CALL:
                snprintf(field, sizeof field, "%s(FreeCall).value_index", at);
                if ((st = check_index(what, field, k, in->u.free_call.value_index, pl->n_values,
                                      "values")))
                    return st;
                break;
            case LY_PTE_INSTR_NONE:
                return verr(LY_E_FORMAT, what, "execution_plan[%zu].%s: no instruction", k, at);
            }
            if (in->type == LY_PTE_KERNEL_CALL || in->type == LY_PTE_DELEGATE_CALL) {
                if (!args)
                    return verr(LY_E_FORMAT, what, "execution_plan[%zu].%s.args: missing", k, at);
                for (size_t a = 0; a < n_args; a++) {
                    snprintf(field, sizeof field, "%s.args[%zu]", at, a);
                    if ((st = check_index(what, field, k, args[a], pl->n_values, "values")))
                        return st;
                }
            }
        }
    }
    return LY_OK;
}

/* ---- Entry points ----------------------------------------------------------- */

/* Decode `file` (16-aligned, owned: freed on failure, kept by the program on success). */
static ly_status decode_owned(uint8_t *file, size_t size, const char *what, ly_pte_program **out)
{
    *out = NULL;
    ly_status st = LY_OK;
    pte_owned *own = calloc(1, sizeof *own);
    ly_arena *arena = ly_arena_new();
    if (!own || !arena) {
        free(own);
        ly_arena_free(arena);
        free(file);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    }
    own->file = file;
    own->file_size = size;
    own->arena = arena;
    ly_pte_program *p = ly_arena_alloc(arena, sizeof *p);
    if (!p) {
        st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
        goto fail;
    }
    p->internal_ = own;

    if (size < 8) {
        st = verr(LY_E_FORMAT, what,
                  "%zu bytes is too small for an ExecuTorch program (needs at least a root offset "
                  "and the \"ET12\" identifier)",
                  size);
        goto fail;
    }
    /* Extended header (optional): absent magic means the whole file is the flatbuffer. */
    uint64_t program_size = size;
    if (size >= 12 && memcmp(file + 8, LY_PTE_HEADER_MAGIC, 4) == 0) {
        if (size < 16) {
            st = verr(LY_E_FORMAT, what, "extended header: truncated (file is %zu bytes)", size);
            goto fail;
        }
        uint32_t len = fb_ld32(file + 12);
        if (len < 24) {
            st = verr(LY_E_FORMAT, what,
                      "extended header: length %u is too small (expected at least 24)", len);
            goto fail;
        }
        if (!ly_pte_range_within(8, len, size)) {
            st = verr(LY_E_FORMAT, what,
                      "extended header: %u bytes run past the end of the %zu-byte file", len, size);
            goto fail;
        }
        p->has_extended_header = true;
        program_size = fb_ld64(file + 16);
        p->segment_base_offset = fb_ld64(file + 24);
        p->segment_data_size = len >= 32 ? fb_ld64(file + 32) : 0;
        if (program_size < (uint64_t)len + 8) {
            st = verr(LY_E_FORMAT, what,
                      "extended header: program_size %llu is smaller than the header itself",
                      (unsigned long long)program_size);
            goto fail;
        }
        uint64_t base = p->segment_base_offset, dsize = p->segment_data_size;
        if (dsize > 0 || base == 0) {
            /* the program, or the segment data from its base, must be in the file */
            if (!ly_pte_range_within(base, base == 0 ? program_size : dsize, size)) {
                st = verr(LY_E_FORMAT, what,
                          "file size is too small: %zu bytes, the extended header needs more "
                          "(program_size %llu, segment_base_offset %llu, segment_data_size "
                          "%llu); truncated?",
                          size, (unsigned long long)program_size, (unsigned long long)base,
                          (unsigned long long)dsize);
                goto fail;
            }
        }
        if (program_size > size) {
            st = verr(LY_E_FORMAT, what,
                      "file size is too small: %zu bytes, program_size is %llu; truncated?", size,
                      (unsigned long long)program_size);
            goto fail;
        }
        if (base != 0 && base < program_size) {
            st = verr(LY_E_FORMAT, what,
                      "extended header: segment_base_offset %llu lies inside the program (%llu "
                      "bytes)",
                      (unsigned long long)base, (unsigned long long)program_size);
            goto fail;
        }
    }
    p->program_size = program_size;
    if (memcmp(file + 4, LY_PTE_FILE_IDENTIFIER, 4) != 0) {
        char id[5];
        for (int i = 0; i < 4; i++)
            id[i] = (file[4 + i] >= 0x20 && file[4 + i] < 0x7f) ? (char)file[4 + i] : '?';
        id[4] = '\0';
        if (file[4] == 'E' && file[5] == 'T')
            st = verr(LY_E_UNSUPPORTED, what,
                      "incompatible version: file identifier \"%s\", expected \"%s\" (the "
                      "ExecuTorch 1.2 program format)",
                      id, LY_PTE_FILE_IDENTIFIER);
        else
            st = verr(LY_E_FORMAT, what,
                      "not an ExecuTorch program: file identifier \"%s\", expected \"%s\"", id,
                      LY_PTE_FILE_IDENTIFIER);
        goto fail;
    }

    dec d;
    fb_reader_init(&d.r, file, (size_t)program_size, what);
    d.arena = arena;
    d.oom = false;
    if (!dec_program(&d, p)) {
        st = dec_error(&d);
        goto fail;
    }

    /* Segments: each must lie inside the file (and inside segment_data_size when given). */
    if (p->n_segments && !p->has_extended_header) {
        st = verr(LY_E_FORMAT, what,
                  "segments: %zu segments but no extended header to say where they start",
                  p->n_segments);
        goto fail;
    }
    if (p->n_segments) {
        ly_pte_bytes *views = ly_arena_alloc(arena, p->n_segments * sizeof *views);
        if (!views) {
            st = ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
            goto fail;
        }
        uint64_t base = p->segment_base_offset;
        uint64_t limit = p->segment_data_size ? p->segment_data_size : size - base;
        if (base == 0 || base > size) {
            st = verr(LY_E_FORMAT, what,
                      "extended header: segment_base_offset %llu, but the program has %zu "
                      "segments in a %zu-byte file",
                      (unsigned long long)base, p->n_segments, size);
            goto fail;
        }
        if (limit > size - base) limit = size - base;
        for (size_t i = 0; i < p->n_segments; i++) {
            const ly_pte_data_segment *s = &p->segments[i];
            if (!ly_pte_range_within(s->offset, s->size, limit)) {
                st = verr(LY_E_FORMAT, what,
                          "segments[%zu]: %llu bytes at offset %llu run past the segment data "
                          "(%llu bytes)",
                          i, (unsigned long long)s->size, (unsigned long long)s->offset,
                          (unsigned long long)limit);
                goto fail;
            }
            views[i].data = file + base + s->offset;
            views[i].size = (size_t)s->size;
        }
        p->segment_data = views;
    }

    if ((st = validate_program(p, what))) goto fail;
    const ly_pte_plan *fwd = ly_pte_find_plan(p, LY_PTE_FORWARD);
    if (!fwd) {
        char names[256] = "";
        size_t used = 0;
        for (size_t i = 0; i < p->n_execution_plan && used < sizeof names - 1; i++) {
            int n = snprintf(names + used, sizeof names - used, "%s\"%s\"", i ? ", " : "",
                             p->execution_plan[i].name ? p->execution_plan[i].name : "");
            if (n > 0) used += (size_t)n;
            if (used >= sizeof names) used = sizeof names - 1;
        }
        st = verr(LY_E_FORMAT, what,
                  "execution_plan: no method named \"forward\" (the program has %zu: %s)",
                  p->n_execution_plan, p->n_execution_plan ? names : "none");
        goto fail;
    }
    if ((st = validate_method(p, (size_t)(fwd - p->execution_plan), what))) goto fail;
    *out = p;
    return LY_OK;
fail:
    free(own->file);
    ly_arena_free(own->arena);
    free(own);
    return st;
}

static uint8_t *alloc_file_buffer(size_t size)
{
    /* ExecuTorch requires alignof(max_align_t); 64 also suits vector loads of segment data.
     * Exactly `size` bytes, so the sanitizers see any read past the file. */
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 1) != 0) return NULL;
    return p;
}

ly_status ly_pte_decode(const uint8_t *bytes, size_t size, const char *what, ly_pte_program **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_decode: NULL output");
    *out = NULL;
    if (!what) what = "ly_pte_decode";
    if (!bytes && size) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: NULL bytes", what);
    uint8_t *file = alloc_file_buffer(size);
    if (!file) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory for %zu bytes", what, size);
    if (size) memcpy(file, bytes, size);
    return decode_owned(file, size, what, out);
}

ly_status ly_pte_read_file(const char *path, ly_pte_program **out)
{
    if (!path || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_read_file: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ly_set_error(errno == ENOENT ? LY_E_NOT_FOUND : LY_E_IO, "%s: cannot open: %s", path,
                            strerror(errno));
    long end = -1;
    if (fseek(f, 0, SEEK_END) == 0) end = ftell(f);
    if (end < 0 || fseek(f, 0, SEEK_SET) != 0) {
        int e = errno;
        fclose(f);
        return ly_set_error(LY_E_IO, "%s: cannot determine the size: %s", path, strerror(e));
    }
    size_t size = (size_t)end;
    uint8_t *file = alloc_file_buffer(size);
    if (!file) {
        fclose(f);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory for %zu bytes", path, size);
    }
    size_t got = size ? fread(file, 1, size, f) : 0;
    int e = ferror(f) ? errno : 0;
    fclose(f);
    if (got != size) {
        free(file);
        return ly_set_error(LY_E_IO, "%s: read %zu of %zu bytes%s%s", path, got, size,
                            e ? ": " : "", e ? strerror(e) : "");
    }
    return decode_owned(file, size, path, out);
}

void ly_pte_program_free(ly_pte_program *p)
{
    if (!p || !p->internal_) return;
    pte_owned *own = p->internal_;
    free(own->file);
    ly_arena_free(own->arena); /* p itself lives in the arena */
    free(own);
}
