/* SPDX-License-Identifier: MIT */
/* Writing `.pte` files: the Program flatbuffer, the eh00 header and the segments (spec B1-B2). */
#include "core/core.h"
#include "core/digest.h"
#include "pte/fb.h"
#include "pte/pte_internal.h"

#include <stdlib.h>
#include <string.h>

/* Field slots of program.fbs (declaration order; a union takes two: type, then value). */
enum {
    PROGRAM_VERSION,
    PROGRAM_PLANS,
    PROGRAM_CONSTANT_BUFFER,
    PROGRAM_DELEGATE_DATA,
    PROGRAM_SEGMENTS,
    PROGRAM_CONSTANT_SEGMENT,
    PROGRAM_MUTABLE_SEGMENTS,
    PROGRAM_NAMED_DATA
};
enum {
    PLAN_NAME,
    PLAN_CONTAINER,
    PLAN_VALUES,
    PLAN_INPUTS,
    PLAN_OUTPUTS,
    PLAN_CHAINS,
    PLAN_OPERATORS,
    PLAN_DELEGATES,
    PLAN_BUFFER_SIZES
};
enum {
    TENSOR_SCALAR_TYPE,
    TENSOR_STORAGE_OFFSET,
    TENSOR_SIZES,
    TENSOR_DIM_ORDER,
    TENSOR_REQUIRES_GRAD,
    TENSOR_DATA_BUFFER_IDX,
    TENSOR_ALLOCATION,
    TENSOR_LAYOUT,
    TENSOR_DYNAMISM,
    TENSOR_EXTRA
};

static fb_ref enc_vec(fb_builder *b, const void *v, size_t n, size_t es, size_t align)
{
    if (!v && b->omit_null) return 0;
    return fb_vec_scalars(b, v, n, es, align);
}

static fb_ref enc_i32s(fb_builder *b, const int32_t *v, size_t n)
{
    return enc_vec(b, v, n, 4, 4);
}

static fb_ref enc_tensor(fb_builder *b, const ly_pte_tensor *t)
{
    fb_ref sizes = enc_i32s(b, t->sizes, t->n_sizes);
    fb_ref dim_order = enc_vec(b, t->dim_order, t->n_dim_order, 1, 1);
    fb_ref alloc = 0, extra = 0;
    if (t->allocation_info.present) {
        fb_table_start(b);
        fb_add_u32(b, 0, t->allocation_info.memory_id, 0);
        fb_add_u32(b, 1, t->allocation_info.memory_offset_low, 0);
        fb_add_u32(b, 2, t->allocation_info.memory_offset_high, 0);
        alloc = fb_table_end(b);
    }
    if (t->extra_tensor_info.present) {
        fb_ref fqn = fb_string(b, t->extra_tensor_info.fully_qualified_name);
        fb_table_start(b);
        fb_add_u64(b, 0, t->extra_tensor_info.mutable_data_segments_idx, 0);
        fb_add_ref(b, 1, fqn);
        fb_add_u8(b, 2, t->extra_tensor_info.location, 0);
        extra = fb_table_end(b);
    }
    fb_table_start(b);
    fb_add_u8(b, TENSOR_SCALAR_TYPE, (uint8_t)t->scalar_type, 0);
    fb_add_u32(b, TENSOR_STORAGE_OFFSET, (uint32_t)t->storage_offset, 0);
    fb_add_ref(b, TENSOR_SIZES, sizes);
    fb_add_ref(b, TENSOR_DIM_ORDER, dim_order);
    fb_add_u8(b, TENSOR_REQUIRES_GRAD, t->requires_grad, 0);
    fb_add_u32(b, TENSOR_DATA_BUFFER_IDX, t->data_buffer_idx, 0);
    fb_add_ref(b, TENSOR_ALLOCATION, alloc);
    fb_add_u8(b, TENSOR_LAYOUT, (uint8_t)t->layout, 0);
    fb_add_u8(b, TENSOR_DYNAMISM, t->shape_dynamism, 0);
    fb_add_ref(b, TENSOR_EXTRA, extra);
    return fb_table_end(b);
}

static fb_ref enc_evalue(fb_builder *b, const void *item)
{
    const ly_pte_evalue *v = item;
    fb_ref val = 0, items = 0;
    switch (v->type) {
    case LY_PTE_EVALUE_NONE:
        break;
    case LY_PTE_EVALUE_NULL:
        fb_table_start(b);
        val = fb_table_end(b);
        break;
    case LY_PTE_EVALUE_INT:
        fb_table_start(b);
        fb_add_u64(b, 0, (uint64_t)v->u.int_val, 0);
        val = fb_table_end(b);
        break;
    case LY_PTE_EVALUE_BOOL:
        fb_table_start(b);
        fb_add_u8(b, 0, v->u.bool_val, 0);
        val = fb_table_end(b);
        break;
    case LY_PTE_EVALUE_DOUBLE:
        fb_table_start(b);
        fb_add_f64(b, 0, v->u.double_val, 0.0);
        val = fb_table_end(b);
        break;
    case LY_PTE_EVALUE_TENSOR:
        val = enc_tensor(b, &v->u.tensor);
        break;
    case LY_PTE_EVALUE_STRING:
        items = fb_string(b, v->u.string_val);
        break;
    case LY_PTE_EVALUE_INT_LIST:
        items = enc_vec(b, v->u.int_list.items, v->u.int_list.n_items, 8, 8);
        break;
    case LY_PTE_EVALUE_DOUBLE_LIST:
        items = enc_vec(b, v->u.double_list.items, v->u.double_list.n_items, 8, 8);
        break;
    case LY_PTE_EVALUE_BOOL_LIST: {
        /* bool is one byte holding 0/1 on every ABI we build for, as in the schema. */
        items = enc_vec(b, v->u.bool_list.items, v->u.bool_list.n_items, 1, 1);
        break;
    }
    case LY_PTE_EVALUE_TENSOR_LIST:
        items = enc_i32s(b, v->u.tensor_list.items, v->u.tensor_list.n_items);
        break;
    case LY_PTE_EVALUE_OPTIONAL_TENSOR_LIST:
        items = enc_i32s(b, v->u.optional_tensor_list.items, v->u.optional_tensor_list.n_items);
        break;
    }
    if (v->type >= LY_PTE_EVALUE_STRING) {
        fb_table_start(b);
        fb_add_ref(b, 0, items);
        val = fb_table_end(b);
    }
    fb_table_start(b);
    fb_add_u8(b, 0, (uint8_t)v->type, 0);
    fb_add_ref(b, 1, val);
    return fb_table_end(b);
}

static fb_ref enc_instruction(fb_builder *b, const void *item)
{
    const ly_pte_instruction *in = item;
    fb_ref val = 0, args = 0;
    switch (in->type) {
    case LY_PTE_KERNEL_CALL:
        args = enc_i32s(b, in->u.kernel_call.args, in->u.kernel_call.n_args);
        fb_table_start(b);
        fb_add_u32(b, 0, (uint32_t)in->u.kernel_call.op_index, 0);
        fb_add_ref(b, 1, args);
        val = fb_table_end(b);
        break;
    case LY_PTE_DELEGATE_CALL:
        args = enc_i32s(b, in->u.delegate_call.args, in->u.delegate_call.n_args);
        fb_table_start(b);
        fb_add_u32(b, 0, (uint32_t)in->u.delegate_call.delegate_index, 0);
        fb_add_ref(b, 1, args);
        val = fb_table_end(b);
        break;
    case LY_PTE_MOVE_CALL:
        fb_table_start(b);
        fb_add_u32(b, 0, (uint32_t)in->u.move_call.move_from, 0);
        fb_add_u32(b, 1, (uint32_t)in->u.move_call.move_to, 0);
        val = fb_table_end(b);
        break;
    case LY_PTE_JUMP_FALSE_CALL:
        fb_table_start(b);
        fb_add_u32(b, 0, (uint32_t)in->u.jump_false_call.cond_value_index, 0);
        fb_add_u32(b, 1, (uint32_t)in->u.jump_false_call.destination_instruction, 0);
        val = fb_table_end(b);
        break;
    case LY_PTE_FREE_CALL:
        fb_table_start(b);
        fb_add_u32(b, 0, (uint32_t)in->u.free_call.value_index, 0);
        val = fb_table_end(b);
        break;
    case LY_PTE_INSTR_NONE:
        break;
    }
    fb_table_start(b);
    fb_add_u8(b, 0, (uint8_t)in->type, 0);
    fb_add_ref(b, 1, val);
    return fb_table_end(b);
}

/* A vector of tables, each built by `fn` from one element of `items`. */
typedef fb_ref (*enc_fn)(fb_builder *b, const void *item);

static fb_ref enc_tables(fb_builder *b, const void *items, size_t n, size_t elem_size, enc_fn fn)
{
    if (!items && b->omit_null) return 0;
    fb_ref *refs = calloc(n ? n : 1, sizeof *refs);
    if (!refs) {
        b->failed = true;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        refs[i] = fn(b, (const uint8_t *)items + i * elem_size);
    fb_ref vec = fb_vec_refs(b, refs, n);
    free(refs);
    return vec;
}
#define ENC_TABLES(b, items, n, fn) enc_tables(b, items, n, sizeof *(items), fn)

static fb_ref enc_frame(fb_builder *b, const void *item)
{
    const ly_pte_frame *f = item;
    fb_ref filename = fb_string(b, f->filename), name = fb_string(b, f->name),
           context = fb_string(b, f->context);
    fb_table_start(b);
    fb_add_ref(b, 0, filename);
    fb_add_u32(b, 1, (uint32_t)f->lineno, 0);
    fb_add_ref(b, 2, name);
    fb_add_ref(b, 3, context);
    return fb_table_end(b);
}

static fb_ref enc_frame_list(fb_builder *b, const void *item)
{
    const ly_pte_frame_list *l = item;
    fb_ref items = ENC_TABLES(b, l->items, l->n_items, enc_frame);
    fb_table_start(b);
    fb_add_ref(b, 0, items);
    return fb_table_end(b);
}

static fb_ref enc_chain(fb_builder *b, const void *item)
{
    const ly_pte_chain *c = item;
    fb_ref inputs = enc_i32s(b, c->inputs, c->n_inputs);
    fb_ref outputs = enc_i32s(b, c->outputs, c->n_outputs);
    fb_ref instructions = ENC_TABLES(b, c->instructions, c->n_instructions, enc_instruction);
    fb_ref stacktrace =
        c->stacktrace ? ENC_TABLES(b, c->stacktrace, c->n_stacktrace, enc_frame_list) : 0;
    fb_table_start(b);
    fb_add_ref(b, 0, inputs);
    fb_add_ref(b, 1, outputs);
    fb_add_ref(b, 2, instructions);
    fb_add_ref(b, 3, stacktrace);
    return fb_table_end(b);
}

static fb_ref enc_operator(fb_builder *b, const void *item)
{
    const ly_pte_operator *op = item;
    fb_ref name = fb_string(b, op->name ? op->name : "");
    fb_ref overload = fb_string(b, op->overload ? op->overload : "");
    fb_table_start(b);
    fb_add_ref(b, 0, name);
    fb_add_ref(b, 1, overload);
    return fb_table_end(b);
}

static fb_ref enc_compile_spec(fb_builder *b, const void *item)
{
    const ly_pte_compile_spec *cs = item;
    fb_ref key = fb_string(b, cs->key ? cs->key : "");
    fb_ref value = enc_vec(b, cs->value.data, cs->value.size, 1, 1);
    fb_table_start(b);
    fb_add_ref(b, 0, key);
    fb_add_ref(b, 1, value);
    return fb_table_end(b);
}

static fb_ref enc_delegate(fb_builder *b, const void *item)
{
    const ly_pte_delegate *d = item;
    fb_ref id = fb_string(b, d->id);
    fb_table_start(b);
    fb_add_u8(b, 0, d->location, 0);
    fb_add_u32(b, 1, d->index, 0);
    fb_ref processed = fb_table_end(b);
    fb_ref specs = ENC_TABLES(b, d->compile_specs, d->n_compile_specs, enc_compile_spec);
    fb_table_start(b);
    fb_add_ref(b, 0, id);
    fb_add_ref(b, 1, processed);
    fb_add_ref(b, 2, specs);
    return fb_table_end(b);
}

static fb_ref enc_plan(fb_builder *b, const void *item)
{
    const ly_pte_plan *pl = item;
    fb_ref name = fb_string(b, pl->name);
    fb_ref container = 0;
    if (pl->has_container_meta_type) {
        fb_ref inp = fb_string(b, pl->encoded_inp_str), out = fb_string(b, pl->encoded_out_str);
        fb_table_start(b);
        fb_add_ref(b, 0, inp);
        fb_add_ref(b, 1, out);
        container = fb_table_end(b);
    }
    fb_ref values = ENC_TABLES(b, pl->values, pl->n_values, enc_evalue);
    fb_ref inputs = enc_i32s(b, pl->inputs, pl->n_inputs);
    fb_ref outputs = enc_i32s(b, pl->outputs, pl->n_outputs);
    fb_ref chains = ENC_TABLES(b, pl->chains, pl->n_chains, enc_chain);
    fb_ref operators = ENC_TABLES(b, pl->operators, pl->n_operators, enc_operator);
    fb_ref delegates = ENC_TABLES(b, pl->delegates, pl->n_delegates, enc_delegate);
    fb_ref sizes = enc_vec(b, pl->non_const_buffer_sizes, pl->n_non_const_buffer_sizes, 8, 8);
    fb_table_start(b);
    fb_add_ref(b, PLAN_NAME, name);
    fb_add_ref(b, PLAN_CONTAINER, container);
    fb_add_ref(b, PLAN_VALUES, values);
    fb_add_ref(b, PLAN_INPUTS, inputs);
    fb_add_ref(b, PLAN_OUTPUTS, outputs);
    fb_add_ref(b, PLAN_CHAINS, chains);
    fb_add_ref(b, PLAN_OPERATORS, operators);
    fb_add_ref(b, PLAN_DELEGATES, delegates);
    fb_add_ref(b, PLAN_BUFFER_SIZES, sizes);
    return fb_table_end(b);
}

/* Buffer and BackendDelegateInlineData: one byte vector, force_align 16. */
static fb_ref enc_byte_table(fb_builder *b, const void *item)
{
    const ly_pte_bytes *bytes = item;
    fb_ref data = enc_vec(b, bytes->data, bytes->size, 1, 16);
    fb_table_start(b);
    fb_add_ref(b, 0, data);
    return fb_table_end(b);
}

static fb_ref enc_segment(fb_builder *b, const void *item)
{
    const ly_pte_data_segment *s = item;
    fb_table_start(b);
    fb_add_u64(b, 0, s->offset, 0);
    fb_add_u64(b, 1, s->size, 0);
    return fb_table_end(b);
}

static fb_ref enc_subsegment(fb_builder *b, const void *item)
{
    const ly_pte_subsegment_offsets *s = item;
    fb_ref offsets = enc_vec(b, s->offsets, s->n_offsets, 8, 8);
    fb_table_start(b);
    fb_add_u32(b, 0, s->segment_index, 0);
    fb_add_ref(b, 1, offsets);
    return fb_table_end(b);
}

static fb_ref enc_named(fb_builder *b, const void *item)
{
    const ly_pte_named_data *nd = item;
    fb_ref key = fb_string(b, nd->key ? nd->key : "");
    fb_table_start(b);
    fb_add_ref(b, 0, key);
    fb_add_u32(b, 1, nd->segment_index, 0);
    return fb_table_end(b);
}

static size_t gcd_size(size_t a, size_t b)
{
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static ly_status encode(const ly_pte_program *p, const ly_pte_segment_in *segments,
                        size_t n_segments, bool omit_null, uint8_t **bytes, size_t *size)
{
    if (!p || !bytes || !size || (n_segments && !segments))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_encode: NULL argument");
    *bytes = NULL;
    *size = 0;

    /* Segment placement: each start aligned to lcm(128, requested) from the segment base. */
    ly_pte_data_segment *table = calloc(n_segments ? n_segments : 1, sizeof *table);
    if (!table) return ly_set_error(LY_E_NO_MEMORY, "ly_pte_encode: out of memory");
    uint64_t cursor = 0;
    for (size_t i = 0; i < n_segments; i++) {
        size_t a = segments[i].alignment ? segments[i].alignment : LY_PTE_SEGMENT_ALIGNMENT;
        size_t lcm = a / gcd_size(a, LY_PTE_SEGMENT_ALIGNMENT) * LY_PTE_SEGMENT_ALIGNMENT;
        if (segments[i].size && !segments[i].data) {
            free(table);
            return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_encode: segment %zu has no data", i);
        }
        cursor = ly_pte_align_up(cursor, lcm);
        table[i].offset = cursor;
        table[i].size = segments[i].size;
        cursor += segments[i].size;
    }
    uint64_t segment_data_size = cursor;

    fb_builder b;
    fb_init(&b);
    b.omit_null = omit_null;
    fb_ref plans = ENC_TABLES(&b, p->execution_plan, p->n_execution_plan, enc_plan);
    fb_ref cbuf = ENC_TABLES(&b, p->constant_buffer, p->n_constant_buffer, enc_byte_table);
    fb_ref ddata =
        ENC_TABLES(&b, p->backend_delegate_data, p->n_backend_delegate_data, enc_byte_table);
    fb_ref segs = p->segments ? ENC_TABLES(&b, p->segments, p->n_segments, enc_segment)
                              : ENC_TABLES(&b, table, n_segments, enc_segment);
    fb_ref cseg = p->constant_segment.present ? enc_subsegment(&b, &p->constant_segment) : 0;
    fb_ref mseg =
        p->n_mutable_data_segments
            ? ENC_TABLES(&b, p->mutable_data_segments, p->n_mutable_data_segments, enc_subsegment)
            : 0;
    fb_ref named = p->n_named_data ? ENC_TABLES(&b, p->named_data, p->n_named_data, enc_named) : 0;
    fb_table_start(&b);
    fb_add_u32(&b, PROGRAM_VERSION, p->version, 0);
    fb_add_ref(&b, PROGRAM_PLANS, plans);
    fb_add_ref(&b, PROGRAM_CONSTANT_BUFFER, cbuf);
    fb_add_ref(&b, PROGRAM_DELEGATE_DATA, ddata);
    fb_add_ref(&b, PROGRAM_SEGMENTS, segs);
    fb_add_ref(&b, PROGRAM_CONSTANT_SEGMENT, cseg);
    fb_add_ref(&b, PROGRAM_MUTABLE_SEGMENTS, mseg);
    fb_add_ref(&b, PROGRAM_NAMED_DATA, named);
    fb_ref root = fb_table_end(&b);
    free(table);

    uint8_t *fbuf;
    size_t fsize;
    bool ok = fb_finish(&b, root, LY_PTE_FILE_IDENTIFIER, &fbuf, &fsize);
    fb_free(&b);
    if (!ok)
        return ly_set_error(LY_E_NO_MEMORY,
                            "ly_pte_encode: the program flatbuffer could not be built (out of "
                            "memory or over 2 GiB)");
    if (n_segments == 0) { /* ExecuTorch writes no extended header without segments */
        *bytes = fbuf;
        *size = fsize;
        return LY_OK;
    }

    /* Splice the header in after the root offset and identifier; 32 is a multiple of the
     * flatbuffer's 16-byte alignment, so every internal offset and alignment still holds. */
    uint64_t program_size = (uint64_t)fsize + LY_PTE_HEADER_SIZE;
    uint64_t base = ly_pte_align_up(program_size, LY_PTE_SEGMENT_ALIGNMENT);
    uint64_t total = base + segment_data_size;
    if (total > SIZE_MAX || total < base) {
        free(fbuf);
        return ly_set_error(LY_E_NO_MEMORY, "ly_pte_encode: file too large");
    }
    uint8_t *out = calloc(1, (size_t)total);
    if (!out) {
        free(fbuf);
        return ly_set_error(LY_E_NO_MEMORY, "ly_pte_encode: out of memory for %llu bytes",
                            (unsigned long long)total);
    }
    fb_st32(out, fb_ld32(fbuf) + LY_PTE_HEADER_SIZE);
    memcpy(out + 4, fbuf + 4, 4);
    memcpy(out + 8, LY_PTE_HEADER_MAGIC, 4);
    fb_st32(out + 12, LY_PTE_HEADER_SIZE);
    fb_st64(out + 16, program_size);
    fb_st64(out + 24, base);
    fb_st64(out + 32, segment_data_size);
    memcpy(out + 8 + LY_PTE_HEADER_SIZE, fbuf + 8, fsize - 8);
    free(fbuf);
    cursor = 0;
    for (size_t i = 0; i < n_segments; i++) {
        size_t a = segments[i].alignment ? segments[i].alignment : LY_PTE_SEGMENT_ALIGNMENT;
        size_t lcm = a / gcd_size(a, LY_PTE_SEGMENT_ALIGNMENT) * LY_PTE_SEGMENT_ALIGNMENT;
        cursor = ly_pte_align_up(cursor, lcm);
        if (segments[i].size) memcpy(out + base + cursor, segments[i].data, segments[i].size);
        cursor += segments[i].size;
    }
    *bytes = out;
    *size = (size_t)total;
    return LY_OK;
}

ly_status ly_pte_encode_ex(const ly_pte_program *p, const ly_pte_segment_in *segments,
                           size_t n_segments, unsigned flags, uint8_t **bytes, size_t *size)
{
    if (!(flags & LY_PTE_ENC_UNCHECKED) && p && (p->segments || p->n_segments))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_pte_encode: program.segments must be empty: the encoder writes "
                            "the segment table from the payloads it is given");
    ly_status st =
        encode(p, segments, n_segments, (flags & LY_PTE_ENC_OMIT_NULL) != 0, bytes, size);
    if (st != LY_OK || (flags & LY_PTE_ENC_UNCHECKED)) return st;
    /* Everything written must load: the decoder's checks are the definition of valid. */
    ly_pte_program *check = NULL;
    st = ly_pte_decode(*bytes, *size, "ly_pte_encode", &check);
    ly_pte_program_free(check);
    if (st != LY_OK) {
        free(*bytes);
        *bytes = NULL;
        *size = 0;
    }
    return st;
}

ly_status ly_pte_encode(const ly_pte_program *p, const ly_pte_segment_in *segments,
                        size_t n_segments, uint8_t **bytes, size_t *size)
{
    return ly_pte_encode_ex(p, segments, n_segments, 0, bytes, size);
}

ly_status ly_pte_pack_constants(const ly_pte_bytes *tensors, size_t n_tensors, uint8_t **data,
                                size_t *size, uint64_t **offsets)
{
    if ((n_tensors && !tensors) || !data || !size || !offsets)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_pack_constants: NULL argument");
    *data = NULL;
    *size = 0;
    *offsets = calloc(n_tensors + 1, sizeof **offsets);
    if (!*offsets) return ly_set_error(LY_E_NO_MEMORY, "ly_pte_pack_constants: out of memory");
    uint64_t cursor = 0;
    for (size_t i = 0; i < n_tensors; i++) {
        (*offsets)[i + 1] = cursor;
        cursor = ly_pte_align_up(cursor + tensors[i].size, LY_PTE_TENSOR_ALIGNMENT);
    }
    if (cursor > SIZE_MAX) goto oom;
    if (cursor) {
        *data = calloc(1, (size_t)cursor);
        if (!*data) goto oom;
        for (size_t i = 0; i < n_tensors; i++)
            if (tensors[i].size)
                memcpy(*data + (*offsets)[i + 1], tensors[i].data, tensors[i].size);
    }
    *size = (size_t)cursor;
    return LY_OK;
oom:
    free(*offsets);
    *offsets = NULL;
    return ly_set_error(LY_E_NO_MEMORY, "ly_pte_pack_constants: out of memory");
}

ly_status ly_pte_named_key(const char *name, const void *bytes, size_t size, char *out,
                           size_t out_size)
{
    if (!name || (!bytes && size) || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_pte_named_key: NULL argument");
    size_t need = strlen(name) + 1 + 64 + 1;
    if (out_size < need)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_pte_named_key: buffer of %zu bytes, need %zu", out_size, need);
    uint8_t digest[LY_DIGEST_MAX];
    size_t len;
    ly_status st = ly_digest_buffer(bytes ? bytes : "", size, LY_SHA256, digest, &len);
    if (st != LY_OK) return st;
    size_t n = strlen(name);
    memcpy(out, name, n);
    out[n] = '_';
    ly_digest_hex(digest, len, out + n + 1);
    return LY_OK;
}
