/* SPDX-License-Identifier: MIT */
/* The ExecuTorch `.pte` format layer (src/pte/): the byte layout of the header and
 * segments, encode/decode round trips of a fully delegated and a mixed program, decoding with
 * Debian's flatc against docs/schema/ (and reading flatc-built buffers back), and refusal of
 * hostile files with messages naming the file and the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "pte/fb.h"
#include "pte/pte_internal.h"
#include "pte/pte_samples.h"
#include "test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t ld32(const uint8_t *p)
{
    return fb_ld32(p);
}

static uint64_t ld64(const uint8_t *p)
{
    return fb_ld64(p);
}

/* ---- Layout ----------------------------------------------------------------- */

static void test_header_and_segment_layout(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);

    assert_memory_equal(b + 4, "ET12", 4);
    assert_memory_equal(b + 8, "eh00", 4);
    assert_int_equal(ld32(b + 12), 32);
    uint64_t program_size = ld64(b + 16), base = ld64(b + 24), data_size = ld64(b + 32);
    uint32_t root = ld32(b);
    assert_true(root >= 40 && root % 4 == 0 && root < program_size);
    assert_int_equal(base % 128, 0);
    assert_int_equal(base, (program_size + 127) / 128 * 128);
    assert_int_equal(n, base + data_size);
    for (uint64_t i = program_size; i < base; i++)
        assert_int_equal(b[i], 0);

    ly_pte_program *p;
    assert_int_equal(ly_pte_decode(b, n, "layout.pte", &p), LY_OK);
    assert_true(p->has_extended_header);
    assert_int_equal(p->program_size, program_size);
    assert_int_equal(p->n_segments, 4);
    /* Segment 0 (the empty constant segment) shares offset 0 with the delegate blob. */
    assert_int_equal(p->segments[0].offset, 0);
    assert_int_equal(p->segments[0].size, 0);
    assert_int_equal(p->segments[1].offset, 0);
    assert_int_equal(p->segments[1].size, s.blob_size);
    uint64_t end = 0;
    for (size_t i = 0; i < p->n_segments; i++) {
        assert_int_equal(p->segments[i].offset % 128, 0);
        assert_true(p->segments[i].offset >= end);
        end = p->segments[i].offset + p->segments[i].size;
        assert_int_equal((uintptr_t)p->segment_data[i].data % 64, 0);
    }
    assert_int_equal(end, data_size); /* no trailing padding */
    assert_memory_equal(b + base + p->segments[1].offset, s.blob, s.blob_size);
    assert_memory_equal(b + base + p->segments[2].offset, s.weights, sizeof s.weights);
    assert_memory_equal(b + base + p->segments[3].offset, s.bias, sizeof s.bias);

    /* The XH00 header of the delegate payload. */
    const uint8_t *x = s.blob;
    assert_int_equal(ld32(x), 0);
    assert_memory_equal(x + 4, "XH00", 4);
    assert_int_equal(fb_ld16(x + 8), 30);
    assert_int_equal(ld32(x + 10), 32);
    uint32_t fs = ld32(x + 14);
    assert_int_equal(ld32(x + 18), 32 + (fs + 15) / 16 * 16);
    assert_int_equal(ld64(x + 22), 0);
    assert_memory_equal(x + 32 + 4, "XN01", 4);
    assert_int_equal(s.blob_size, 32 + (fs + 15) / 16 * 16);
    ly_pte_program_free(p);
    free(b);
    pte_sample_free(&s);
}

/* A program without segments is written without the extended header; inline delegate data
 * and the deprecated inline constant buffer are read back, 16-aligned (force_align). */
static void test_no_segments_no_header(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    ly_pte_bytes inline_blob = {s.blob, s.blob_size};
    ly_pte_bytes cbuf[2] = {{NULL, 0}, {(const uint8_t *)s.bias, sizeof s.bias}};
    s.delegate.location = LY_PTE_INLINE;
    s.delegate.index = 0;
    s.program.backend_delegate_data = &inline_blob;
    s.program.n_backend_delegate_data = 1;
    s.program.constant_buffer = cbuf;
    s.program.n_constant_buffer = 2;
    s.program.constant_segment.present = false;
    uint8_t *b;
    size_t n;
    assert_int_equal(ly_pte_encode(&s.program, NULL, 0, &b, &n), LY_OK);
    assert_memory_equal(b + 4, "ET12", 4);
    assert_memory_not_equal(b + 8, "eh00", 4);
    ly_pte_program *p;
    assert_int_equal(ly_pte_decode(b, n, "inline.pte", &p), LY_OK);
    assert_false(p->has_extended_header);
    ly_pte_bytes blob;
    assert_int_equal(ly_pte_delegate_blob(p, &p->execution_plan[0].delegates[0], &blob), LY_OK);
    assert_int_equal(blob.size, s.blob_size);
    assert_memory_equal(blob.data, s.blob, s.blob_size);
    assert_int_equal((uintptr_t)blob.data % 16, 0);
    ly_pte_bytes c;
    assert_int_equal(ly_pte_constant_data(p, &p->execution_plan[0].values[5].u.tensor, &c), LY_OK);
    assert_int_equal(c.size, 16);
    assert_memory_equal(c.data, s.bias, 16);
    assert_int_equal((uintptr_t)c.data % 16, 0);
    ly_pte_program_free(p);
    free(b);
    pte_sample_free(&s);
}

/* ---- Round trips ------------------------------------------------------------ */

/* decode(encode(x)) re-encoded from its own segment views gives the same bytes. */
static void assert_reencodes_identically(const ly_pte_program *p, const uint8_t *b, size_t n)
{
    ly_pte_program copy = *p;
    copy.segments = NULL;
    copy.n_segments = 0;
    ly_pte_segment_in segs[8];
    assert_true(p->n_segments <= 8);
    for (size_t i = 0; i < p->n_segments; i++)
        segs[i] = (ly_pte_segment_in){p->segment_data[i].data, p->segment_data[i].size, 0};
    uint8_t *b2;
    size_t n2;
    assert_int_equal(ly_pte_encode(&copy, segs, p->n_segments, &b2, &n2), LY_OK);
    assert_int_equal(n2, n);
    assert_memory_equal(b2, b, n);
    free(b2);
}

static void assert_tensor_equal(const ly_pte_tensor *a, const ly_pte_tensor *b)
{
    assert_int_equal(a->scalar_type, b->scalar_type);
    assert_int_equal(a->n_sizes, b->n_sizes);
    assert_memory_equal(a->sizes, b->sizes, a->n_sizes * sizeof *a->sizes);
    assert_int_equal(a->n_dim_order, b->n_dim_order);
    assert_memory_equal(a->dim_order, b->dim_order, a->n_dim_order);
    assert_int_equal(a->data_buffer_idx, b->data_buffer_idx);
    assert_int_equal(a->allocation_info.present, b->allocation_info.present);
    assert_int_equal(a->allocation_info.memory_id, b->allocation_info.memory_id);
    assert_int_equal(ly_pte_memory_offset(&a->allocation_info),
                     ly_pte_memory_offset(&b->allocation_info));
    assert_int_equal(a->shape_dynamism, b->shape_dynamism);
    assert_int_equal(a->extra_tensor_info.present, b->extra_tensor_info.present);
}

static void assert_plan_equal(const ly_pte_plan *a, const ly_pte_plan *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->has_container_meta_type, b->has_container_meta_type);
    if (a->has_container_meta_type) {
        assert_string_equal(a->encoded_inp_str, b->encoded_inp_str);
        assert_string_equal(a->encoded_out_str, b->encoded_out_str);
    }
    assert_int_equal(a->n_values, b->n_values);
    for (size_t i = 0; i < a->n_values; i++) {
        const ly_pte_evalue *x = &a->values[i], *y = &b->values[i];
        assert_int_equal(x->type, y->type);
        switch (x->type) {
        case LY_PTE_EVALUE_TENSOR:
            assert_tensor_equal(&x->u.tensor, &y->u.tensor);
            break;
        case LY_PTE_EVALUE_INT:
            assert_int_equal(x->u.int_val, y->u.int_val);
            break;
        case LY_PTE_EVALUE_DOUBLE_LIST:
            assert_int_equal(x->u.double_list.n_items, y->u.double_list.n_items);
            assert_memory_equal(x->u.double_list.items, y->u.double_list.items,
                                x->u.double_list.n_items * sizeof(double));
            break;
        default:
            break;
        }
    }
    assert_int_equal(a->n_inputs, b->n_inputs);
    assert_memory_equal(a->inputs, b->inputs, a->n_inputs * 4);
    assert_int_equal(a->n_outputs, b->n_outputs);
    assert_memory_equal(a->outputs, b->outputs, a->n_outputs * 4);
    assert_int_equal(a->n_chains, b->n_chains);
    for (size_t c = 0; c < a->n_chains; c++) {
        assert_int_equal(a->chains[c].n_instructions, b->chains[c].n_instructions);
        for (size_t j = 0; j < a->chains[c].n_instructions; j++) {
            const ly_pte_instruction *x = &a->chains[c].instructions[j];
            const ly_pte_instruction *y = &b->chains[c].instructions[j];
            assert_int_equal(x->type, y->type);
            if (x->type == LY_PTE_KERNEL_CALL) {
                assert_int_equal(x->u.kernel_call.op_index, y->u.kernel_call.op_index);
                assert_int_equal(x->u.kernel_call.n_args, y->u.kernel_call.n_args);
                assert_memory_equal(x->u.kernel_call.args, y->u.kernel_call.args,
                                    x->u.kernel_call.n_args * 4);
            } else if (x->type == LY_PTE_DELEGATE_CALL) {
                assert_int_equal(x->u.delegate_call.delegate_index,
                                 y->u.delegate_call.delegate_index);
                assert_int_equal(x->u.delegate_call.n_args, y->u.delegate_call.n_args);
                assert_memory_equal(x->u.delegate_call.args, y->u.delegate_call.args,
                                    x->u.delegate_call.n_args * 4);
            }
        }
        /* optional: absent unless given */
        assert_int_equal(a->chains[c].stacktrace == NULL, b->chains[c].stacktrace == NULL);
    }
    assert_int_equal(a->n_operators, b->n_operators);
    for (size_t i = 0; i < a->n_operators; i++) {
        assert_string_equal(a->operators[i].name, b->operators[i].name);
        assert_string_equal(a->operators[i].overload, b->operators[i].overload);
    }
    assert_int_equal(a->n_delegates, b->n_delegates);
    for (size_t i = 0; i < a->n_delegates; i++) {
        assert_string_equal(a->delegates[i].id, b->delegates[i].id);
        assert_int_equal(a->delegates[i].location, b->delegates[i].location);
        assert_int_equal(a->delegates[i].index, b->delegates[i].index);
        assert_non_null(b->delegates[i].compile_specs); /* present, even empty */
        assert_int_equal(a->delegates[i].n_compile_specs, b->delegates[i].n_compile_specs);
    }
    assert_int_equal(a->n_non_const_buffer_sizes, b->n_non_const_buffer_sizes);
    assert_memory_equal(a->non_const_buffer_sizes, b->non_const_buffer_sizes,
                        a->n_non_const_buffer_sizes * 8);
}

static void assert_graph_equal(const ly_xnn_graph *a, const ly_xnn_graph *b)
{
    assert_string_equal(a->version, b->version);
    assert_int_equal(a->num_externs, b->num_externs);
    assert_int_equal(a->n_xvalues, b->n_xvalues);
    for (size_t i = 0; i < a->n_xvalues; i++) {
        const ly_xnn_tensor_value *x = &a->xvalues[i].tensor, *y = &b->xvalues[i].tensor;
        assert_int_equal(a->xvalues[i].type, b->xvalues[i].type);
        assert_int_equal(x->datatype, y->datatype);
        assert_int_equal(x->num_dims, y->num_dims);
        assert_memory_equal(x->dims, y->dims, x->n_dims * 4);
        assert_int_equal(x->constant_buffer_idx, y->constant_buffer_idx);
        assert_int_equal(x->external_id, y->external_id);
        assert_int_equal(x->flags, y->flags);
        assert_int_equal(x->id_out, y->id_out);
    }
    assert_int_equal(a->n_xnodes, b->n_xnodes);
    for (size_t i = 0; i < a->n_xnodes; i++) {
        const ly_xnn_node *x = &a->xnodes[i], *y = &b->xnodes[i];
        assert_int_equal(x->type, y->type);
        assert_int_equal(x->debug_handle, y->debug_handle);
        assert_int_equal(x->has_output_min_max, y->has_output_min_max);
        assert_true(x->output_min == y->output_min && x->output_max == y->output_max);
        switch (ly_xnn_node_kind_of(x->type)) {
        case LY_XNN_KIND_CONV:
            assert_memory_equal(&x->u.conv, &y->u.conv, sizeof x->u.conv);
            break;
        case LY_XNN_KIND_1X1:
            assert_memory_equal(&x->u.n1x1, &y->u.n1x1, sizeof x->u.n1x1);
            break;
        case LY_XNN_KIND_TRANSPOSE:
            assert_int_equal(x->u.transpose.num_dims, y->u.transpose.num_dims);
            assert_int_equal(x->u.transpose.n_perm, y->u.transpose.n_perm);
            assert_memory_equal(x->u.transpose.perm, y->u.transpose.perm,
                                x->u.transpose.n_perm * 4);
            assert_int_equal(x->u.transpose.input_id, y->u.transpose.input_id);
            assert_int_equal(x->u.transpose.output_id, y->u.transpose.output_id);
            break;
        default:
            fail_msg("unexpected node kind in sample");
        }
    }
    assert_int_equal(a->n_constant_data, b->n_constant_data);
    for (size_t i = 0; i < a->n_constant_data; i++) {
        assert_int_equal(a->constant_data[i].offset, b->constant_data[i].offset);
        assert_int_equal(a->constant_data[i].size, b->constant_data[i].size);
        if (a->constant_data[i].named_key)
            assert_string_equal(a->constant_data[i].named_key, b->constant_data[i].named_key);
        else
            assert_null(b->constant_data[i].named_key);
    }
}

static void test_roundtrip_delegated(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    ly_pte_program *p;
    assert_int_equal(ly_pte_decode(b, n, "delegated.pte", &p), LY_OK);
    assert_int_equal(p->version, 0);
    assert_int_equal(p->n_execution_plan, 1);
    const ly_pte_plan *fwd = ly_pte_find_plan(p, "forward");
    assert_non_null(fwd);
    assert_plan_equal(&s.plan, fwd);
    assert_int_equal(p->n_constant_buffer, 0);
    assert_non_null(p->constant_buffer); /* written empty, as ExecuTorch does */
    assert_int_equal(p->constant_segment.n_offsets, 1);
    assert_int_equal(p->n_named_data, 2);

    ly_pte_bytes blob, w;
    assert_int_equal(ly_pte_delegate_blob(p, &fwd->delegates[0], &blob), LY_OK);
    assert_int_equal(blob.size, s.blob_size);
    assert_memory_equal(blob.data, s.blob, s.blob_size);
    assert_int_equal(ly_pte_named_data_find(p, s.keys[0], &w), LY_OK);
    assert_int_equal(w.size, sizeof s.weights);
    assert_memory_equal(w.data, s.weights, sizeof s.weights);
    assert_int_equal(ly_pte_named_data_find(p, "nope", &w), LY_E_NOT_FOUND);
    assert_non_null(strstr(ly_last_error(), "nope"));
    /* The key is "<name>_<sha256 of the bytes>". */
    assert_int_equal(strlen(s.keys[0]), strlen("p_conv_weight_") + 64);

    ly_xnn_graph *g;
    assert_int_equal(ly_xnn_decode(blob.data, blob.size, "delegated.pte: delegate 0", &g), LY_OK);
    assert_true(g->has_header);
    assert_string_equal(g->identifier, "XN01");
    assert_int_equal(g->constant_area.size, 0);
    assert_graph_equal(&s.graph, g);
    ly_xnn_graph_free(g);

    assert_reencodes_identically(p, b, n);
    ly_pte_program_free(p);
    free(b);
    pte_sample_free(&s);
}

static void test_roundtrip_mixed(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    ly_pte_program *p;
    assert_int_equal(ly_pte_decode(b, n, "mixed.pte", &p), LY_OK);
    const ly_pte_plan *fwd = ly_pte_find_plan(p, "forward");
    assert_non_null(fwd);
    assert_plan_equal(&s.plan, fwd);
    assert_int_equal(fwd->values[2].type, LY_PTE_EVALUE_NULL);
    ly_pte_bytes c;
    assert_int_equal(ly_pte_constant_data(p, &fwd->values[5].u.tensor, &c), LY_OK);
    assert_int_equal(c.size, 16);
    assert_memory_equal(c.data, s.bias, 16);
    uint64_t nbytes;
    assert_int_equal(ly_pte_tensor_nbytes(&fwd->values[7].u.tensor, &nbytes), LY_OK);
    assert_int_equal(nbytes, 4 * 4 * 8 * 8);
    assert_null(p->named_data); /* optional and empty: not written */
    ly_pte_bytes blob;
    assert_int_equal(ly_pte_delegate_blob(p, &fwd->delegates[0], &blob), LY_OK);
    ly_xnn_graph *g;
    assert_int_equal(ly_xnn_decode(blob.data, blob.size, "mixed", &g), LY_OK);
    assert_graph_equal(&s.graph, g);
    ly_xnn_graph_free(g);
    assert_reencodes_identically(p, b, n);
    ly_pte_program_free(p);
    free(b);
    pte_sample_free(&s);
}

/* Every value type, instruction type, optional table and a stack trace survive. */
static void test_roundtrip_all_kinds(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    ly_pte_evalue v[16];
    memcpy(v, s.values, sizeof s.values);
    const bool bools[3] = {true, false, true};
    const int64_t ints[2] = {-5, INT64_MAX};
    const int32_t tl[2] = {0, 1}, otl[3] = {0, -1, 4};
    v[8] = (ly_pte_evalue){.type = LY_PTE_EVALUE_BOOL, .u.bool_val = true};
    v[9] = (ly_pte_evalue){.type = LY_PTE_EVALUE_DOUBLE, .u.double_val = -0.0};
    v[10] = (ly_pte_evalue){.type = LY_PTE_EVALUE_STRING, .u.string_val = "nearest"};
    v[11].type = LY_PTE_EVALUE_INT_LIST;
    v[11].u.int_list.items = ints;
    v[11].u.int_list.n_items = 2;
    v[12].type = LY_PTE_EVALUE_BOOL_LIST;
    v[12].u.bool_list.items = bools;
    v[12].u.bool_list.n_items = 3;
    v[13].type = LY_PTE_EVALUE_TENSOR_LIST;
    v[13].u.tensor_list.items = tl;
    v[13].u.tensor_list.n_items = 2;
    v[14].type = LY_PTE_EVALUE_OPTIONAL_TENSOR_LIST;
    v[14].u.optional_tensor_list.items = otl;
    v[14].u.optional_tensor_list.n_items = 3;
    v[15] = v[1];
    v[15].u.tensor.allocation_info.memory_offset_low = 0;
    v[15].u.tensor.extra_tensor_info = (ly_pte_extra_tensor_info){true, 0, "model.conv.weight", 0};
    v[15].u.tensor.shape_dynamism = LY_PTE_DYNAMIC_BOUND;
    s.plan.values = v;
    s.plan.n_values = 16;
    ly_pte_instruction ins[6];
    memcpy(ins, s.instructions, sizeof s.instructions);
    ins[3] = (ly_pte_instruction){.type = LY_PTE_MOVE_CALL, .u.move_call = {1, 15}};
    ins[4] = (ly_pte_instruction){.type = LY_PTE_JUMP_FALSE_CALL, .u.jump_false_call = {8, 5}};
    ins[5] = (ly_pte_instruction){.type = LY_PTE_FREE_CALL, .u.free_call = {15}};
    s.chain.instructions = ins;
    s.chain.n_instructions = 6;
    ly_pte_frame frames[1] = {{"model.py", "forward", "x = self.conv(x)", 42}};
    ly_pte_frame_list st[6];
    for (int i = 0; i < 6; i++)
        st[i] = (ly_pte_frame_list){frames, 1};
    s.chain.stacktrace = st;
    s.chain.n_stacktrace = 6;
    const uint8_t spec_value[3] = {1, 2, 3};
    ly_pte_compile_spec spec = {"max_threads", {spec_value, 3}};
    s.delegate.compile_specs = &spec;
    s.delegate.n_compile_specs = 1;
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    ly_pte_program *p;
    assert_int_equal(ly_pte_decode(b, n, "kinds.pte", &p), LY_OK);
    const ly_pte_plan *f = &p->execution_plan[0];
    assert_plan_equal(&s.plan, f);
    assert_true(f->values[8].u.bool_val);
    assert_true(f->values[9].u.double_val == 0.0 && signbit(f->values[9].u.double_val));
    assert_string_equal(f->values[10].u.string_val, "nearest");
    assert_memory_equal(f->values[11].u.int_list.items, ints, sizeof ints);
    assert_int_equal(f->values[12].u.bool_list.n_items, 3);
    assert_true(f->values[12].u.bool_list.items[0] && !f->values[12].u.bool_list.items[1]);
    assert_memory_equal(f->values[14].u.optional_tensor_list.items, otl, sizeof otl);
    assert_string_equal(f->values[15].u.tensor.extra_tensor_info.fully_qualified_name,
                        "model.conv.weight");
    assert_int_equal(f->chains[0].instructions[4].u.jump_false_call.destination_instruction, 5);
    assert_int_equal(f->chains[0].n_stacktrace, 6);
    assert_string_equal(f->chains[0].stacktrace[2].items[0].context, "x = self.conv(x)");
    assert_int_equal(f->chains[0].stacktrace[2].items[0].lineno, 42);
    assert_string_equal(f->delegates[0].compile_specs[0].key, "max_threads");
    assert_int_equal(f->delegates[0].compile_specs[0].value.size, 3);
    assert_memory_equal(f->delegates[0].compile_specs[0].value.data, spec_value, 3);
    assert_reencodes_identically(p, b, n);
    ly_pte_program_free(p);
    free(b);
    pte_sample_free(&s);
}

/* ---- Debian flatc against docs/schema/ --------------------------------------- */

static const char *schema_path(const char *name, char *buf, size_t size)
{
    /* tests/test_pte_format.c -> <repo>/docs/schema/<name> */
    const char *file = __FILE__;
    const char *slash = strrchr(file, '/');
    int dir = slash ? (int)(slash - file) : 0;
    snprintf(buf, size, "%.*s/../docs/schema/%s", dir, file, name);
    return buf;
}

static bool have_flatc(void)
{
    return system("command -v flatc >/dev/null 2>&1") == 0;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static char *read_text(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = malloc((size_t)n + 1);
    assert_non_null(t);
    assert_int_equal(fread(t, 1, (size_t)n, f), (size_t)n);
    t[n] = '\0';
    fclose(f);
    if (size) *size = (size_t)n;
    return t;
}

/* flatc --json on `bin`; returns the parsed JSON. */
static cJSON *flatc_json(const char *schema, const char *bin)
{
    char cmd[2048], sp[1024], out[512];
    snprintf(cmd, sizeof cmd,
             "flatc --json --raw-binary --strict-json -o '%s' '%s' -- '%s' >/dev/null 2>&1",
             ly_test_scratch(), schema_path(schema, sp, sizeof sp), bin);
    assert_int_equal(system(cmd), 0);
    const char *base = strrchr(bin, '/') + 1;
    snprintf(out, sizeof out, "%s/%.*s.json", ly_test_scratch(), (int)(strrchr(base, '.') - base),
             base);
    char *text = read_text(out, NULL);
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    return j;
}

static cJSON *at(cJSON *j, const char *path)
{
    /* "a.b[2].c" */
    char key[64];
    const char *p = path;
    while (j && *p) {
        size_t k = 0;
        while (*p && *p != '.' && *p != '[' && k < sizeof key - 1)
            key[k++] = *p++;
        key[k] = '\0';
        if (k) j = cJSON_GetObjectItemCaseSensitive(j, key);
        if (*p == '[') {
            int i = atoi(p + 1);
            j = cJSON_GetArrayItem(j, i);
            p = strchr(p, ']') + 1;
        }
        if (*p == '.') p++;
    }
    return j;
}

static void test_flatc_decodes_our_files(void **state)
{
    (void)state;
    if (!have_flatc()) {
        print_message("flatc not installed (apt-get install flatbuffers-compiler): skipped\n");
        skip();
    }
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    char path[512];
    write_file(ly_test_scratch_path("delegated.pte", path, sizeof path), b, n);
    cJSON *j = flatc_json("program.fbs", path);
    assert_string_equal(at(j, "execution_plan[0].name")->valuestring, "forward");
    assert_string_equal(at(j, "execution_plan[0].delegates[0].id")->valuestring, "XnnpackBackend");
    assert_string_equal(at(j, "execution_plan[0].delegates[0].processed.location")->valuestring,
                        "SEGMENT");
    assert_int_equal(at(j, "execution_plan[0].delegates[0].processed.index")->valueint, 1);
    assert_int_equal(cJSON_GetArraySize(at(j, "execution_plan[0].delegates[0].compile_specs")), 0);
    assert_string_equal(at(j, "execution_plan[0].values[0].val_type")->valuestring, "Tensor");
    assert_string_equal(at(j, "execution_plan[0].values[0].val.scalar_type")->valuestring, "FLOAT");
    assert_int_equal(
        at(j, "execution_plan[0].values[1].val.allocation_info.memory_offset_low")->valueint, 768);
    assert_string_equal(
        at(j, "execution_plan[0].chains[0].instructions[0].instr_args_type")->valuestring,
        "DelegateCall");
    assert_int_equal(at(j, "execution_plan[0].non_const_buffer_sizes[1]")->valueint, 1792);
    assert_int_equal(cJSON_GetArraySize(at(j, "segments")), 4);
    assert_string_equal(at(j, "named_data[0].key")->valuestring, s.keys[0]);
    assert_int_equal(at(j, "named_data[1].segment_index")->valueint, 3);
    cJSON_Delete(j);

    /* The XNNGraph, sliced out of the delegate payload. */
    uint32_t fs = ld32(s.blob + 14);
    write_file(ly_test_scratch_path("graph.bin", path, sizeof path), s.blob + 32, fs);
    j = flatc_json("xnnpack.fbs", path);
    assert_string_equal(at(j, "version")->valuestring, "0");
    assert_int_equal(at(j, "num_externs")->valueint, 2);
    assert_string_equal(at(j, "xnodes[0].xnode_union_type")->valuestring, "XNNStaticTranspose");
    assert_string_equal(at(j, "xnodes[1].xnode_union_type")->valuestring, "XNNConv2d");
    assert_int_equal(at(j, "xnodes[1].xnode_union.group_output_channels")->valueint, 4);
    assert_true(at(j, "xnodes[1].output_min_max.output_max")->valuedouble == 6.0);
    assert_int_equal(at(j, "xnodes[2].xnode_union.perm[1]")->valueint, 3);
    assert_string_equal(at(j, "xvalues[2].xvalue_union.datatype")->valuestring,
                        "xnn_datatype_fp32");
    assert_int_equal(at(j, "xvalues[5].xvalue_union.flags")->valueint, 2);
    assert_string_equal(at(j, "constant_data[1].named_key")->valuestring, s.keys[0]);
    cJSON_Delete(j);
    free(b);
    pte_sample_free(&s);

    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    write_file(ly_test_scratch_path("mixed.pte", path, sizeof path), b, n);
    j = flatc_json("program.fbs", path);
    assert_string_equal(at(j, "execution_plan[0].operators[0].name")->valuestring,
                        "aten::upsample_nearest2d");
    assert_string_equal(
        at(j, "execution_plan[0].chains[0].instructions[1].instr_args_type")->valuestring,
        "KernelCall");
    assert_int_equal(
        at(j, "execution_plan[0].chains[0].instructions[2].instr_args.args[3]")->valueint, 7);
    assert_string_equal(at(j, "execution_plan[0].values[3].val_type")->valuestring, "DoubleList");
    assert_int_equal(at(j, "constant_segment.offsets[1]")->valueint, 0);
    assert_int_equal(cJSON_GetArraySize(at(j, "constant_segment.offsets")), 2);
    cJSON_Delete(j);
    free(b);
    pte_sample_free(&s);
}

/* flatc builds its own layout (other field order, other padding): the reader must follow it.
 * The program is rebuilt from its JSON and re-framed as ExecuTorch's serializer does (spec B5). */
static void test_reads_flatc_built_buffers(void **state)
{
    (void)state;
    if (!have_flatc()) {
        print_message("flatc not installed: skipped\n");
        skip();
    }
    pte_sample s;
    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(pte_sample_encode(&s, &b, &n), LY_OK);
    ly_pte_program *ours;
    assert_int_equal(ly_pte_decode(b, n, "ours", &ours), LY_OK);
    char path[512], sp[1024], cmd[2048];
    write_file(ly_test_scratch_path("rebuilt.pte", path, sizeof path), b, n);
    cJSON_Delete(flatc_json("program.fbs", path)); /* leaves rebuilt.json */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && rm -f rebuilt.pte && flatc --binary --strict-json '%s' rebuilt.json "
             ">/dev/null 2>&1",
             ly_test_scratch(), schema_path("program.fbs", sp, sizeof sp));
    assert_int_equal(system(cmd), 0);
    size_t fsize;
    uint8_t *fbuf = (uint8_t *)read_text(path, &fsize);
    assert_non_null(fbuf);
    assert_memory_equal(fbuf + 4, "ET12", 4);
    /* Frame it: header after byte 8, root offset + 32, segments at a 128-aligned base. */
    uint64_t program_size = fsize + 32, base = (program_size + 127) / 128 * 128;
    uint64_t data_size = ours->segments[1].offset + ours->segments[1].size;
    size_t total = (size_t)(base + data_size);
    uint8_t *f = calloc(1, total);
    assert_non_null(f);
    fb_st32(f, ld32(fbuf) + 32);
    memcpy(f + 4, "ET12eh00", 8);
    fb_st32(f + 12, 32);
    fb_st64(f + 16, program_size);
    fb_st64(f + 24, base);
    fb_st64(f + 32, data_size);
    memcpy(f + 40, fbuf + 8, fsize - 8);
    for (size_t i = 0; i < ours->n_segments; i++)
        memcpy(f + base + ours->segments[i].offset, ours->segment_data[i].data,
               ours->segment_data[i].size);
    ly_pte_program *theirs;
    assert_int_equal(ly_pte_decode(f, total, "flatc-built", &theirs), LY_OK);
    assert_plan_equal(&s.plan, &theirs->execution_plan[0]);
    assert_int_equal(theirs->n_segments, ours->n_segments);
    ly_pte_program_free(theirs);
    free(f);
    free(fbuf);

    /* The XNNGraph alone: a bare flatbuffer (no XH00), as the runtime also accepts. */
    uint32_t gs = ld32(s.blob + 14);
    write_file(ly_test_scratch_path("g.bin", path, sizeof path), s.blob + 32, gs);
    cJSON_Delete(flatc_json("xnnpack.fbs", path)); /* leaves g.json */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && rm -f g.bin && flatc --binary --strict-json '%s' g.json >/dev/null 2>&1",
             ly_test_scratch(), schema_path("xnnpack.fbs", sp, sizeof sp));
    assert_int_equal(system(cmd), 0);
    uint8_t *gbuf = (uint8_t *)read_text(path, &fsize);
    assert_non_null(gbuf);
    ly_xnn_graph *g;
    assert_int_equal(ly_xnn_decode(gbuf, fsize, "flatc graph", &g), LY_OK);
    assert_false(g->has_header);
    assert_graph_equal(&s.graph, g);
    ly_xnn_graph_free(g);
    free(gbuf);
    ly_pte_program_free(ours);
    free(b);
    pte_sample_free(&s);
}

/* ---- Hostile files ---------------------------------------------------------- */

/* Decoding must fail with `status` and a message containing the file name and `needle`. */
static void expect_refusal(const uint8_t *b, size_t n, ly_status status, const char *needle)
{
    ly_pte_program *p = (ly_pte_program *)1;
    ly_status st = ly_pte_decode(b, n, "hostile.pte", &p);
    if (st != status || !strstr(ly_last_error(), needle) || !strstr(ly_last_error(), "hostile.pte"))
        fail_msg("expected %s with \"%s\", got %s: %s", ly_status_name(status), needle,
                 ly_status_name(st), ly_last_error());
    assert_null(p);
}

/* Encode a (possibly invalid) sample without the encoder's own check. */
static uint8_t *encode_raw(const pte_sample *s, unsigned flags, size_t *n)
{
    uint8_t *b;
    assert_int_equal(ly_pte_encode_ex(&s->program, s->segments, s->n_segments,
                                      flags | LY_PTE_ENC_UNCHECKED, &b, n),
                     LY_OK);
    return b;
}

static void expect_model_refused(const pte_sample *s, unsigned flags, ly_status status,
                                 const char *needle)
{
    size_t n;
    uint8_t *b = encode_raw(s, flags, &n);
    expect_refusal(b, n, status, needle);
    free(b);
    /* The checked encoder refuses the same model. */
    if (!(flags & LY_PTE_ENC_OMIT_NULL) && !s->program.segments) {
        uint8_t *b2 = (uint8_t *)1;
        assert_int_equal(ly_pte_encode(&s->program, s->segments, s->n_segments, &b2, &n), status);
        assert_null(b2);
    }
}

static void test_refuses_bad_header(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    size_t n;
    uint8_t *b = encode_raw(&s, 0, &n);
    uint8_t *c = malloc(n);
    assert_non_null(c);

    memcpy(c, b, n);
    memcpy(c + 4, "ET11", 4);
    expect_refusal(c, n, LY_E_UNSUPPORTED, "incompatible version");
    memcpy(c + 4, "PK\3\4", 4);
    expect_refusal(c, n, LY_E_FORMAT, "not an ExecuTorch program");
    memcpy(c, b, n);
    fb_st32(c + 12, 16);
    expect_refusal(c, n, LY_E_FORMAT, "length 16 is too small (expected at least 24)");
    memcpy(c, b, n);
    fb_st64(c + 32, ld64(b + 32) + 1); /* segment_data_size past the end */
    expect_refusal(c, n, LY_E_FORMAT, "file size is too small");
    memcpy(c, b, n);
    fb_st64(c + 16, n + 1); /* program_size past the end */
    expect_refusal(c, n, LY_E_FORMAT, "too small");
    memcpy(c, b, n);
    fb_st64(c + 24, 64); /* segment base inside the program */
    expect_refusal(c, n, LY_E_FORMAT, "segment_base_offset 64 lies inside the program");
    memcpy(c, b, n);
    fb_st32(c, (uint32_t)n + 100); /* root offset out of range */
    expect_refusal(c, n, LY_E_FORMAT, "root table offset");
    expect_refusal(b, 5, LY_E_FORMAT, "too small");
    expect_refusal(b, 0, LY_E_FORMAT, "too small");

    /* Truncation at every byte is refused (the header promises the full size). */
    for (size_t k = 0; k < n; k++) {
        ly_pte_program *p = NULL;
        ly_status st = ly_pte_decode(b, k, "cut.pte", &p);
        if (st == LY_OK) fail_msg("a file cut to %zu of %zu bytes was accepted", k, n);
        assert_true(strlen(ly_last_error()) > 0);
    }
    free(c);
    free(b);
    pte_sample_free(&s);
}

static void test_refuses_bad_segments(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    ly_pte_data_segment segs[4] = {{0, 0}, {0, s.blob_size}, {s.blob_size + 4096, 432}, {0, 16}};
    s.program.segments = segs;
    s.program.n_segments = 4;
    expect_model_refused(&s, 0, LY_E_FORMAT, "segments[2]: 432 bytes at offset");
    s.program.segments = NULL;
    s.program.n_segments = 0;

    s.delegate.index = 9;
    expect_model_refused(&s, 0, LY_E_FORMAT, "delegates[0].processed.index: 9 is out of range");
    s.delegate.index = 1;
    s.delegate.location = 7;
    expect_model_refused(&s, 0, LY_E_FORMAT, "processed.location: 7 is not a DataLocation");
    s.delegate.location = LY_PTE_INLINE;
    s.delegate.index = 0;
    expect_model_refused(&s, 0, LY_E_FORMAT, "(0 inline delegate blobs)");
    s.delegate.location = LY_PTE_SEGMENT;
    s.delegate.index = 1;
    s.named[1].segment_index = 4;
    expect_model_refused(&s, 0, LY_E_FORMAT, "named_data[1]");
    pte_sample_free(&s);

    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    s.constant_offsets[1] = 64; /* beyond the 16-byte constant segment */
    expect_model_refused(&s, 0, LY_E_FORMAT, "run past the constant segment");
    s.constant_offsets[1] = 0;
    s.values[5].u.tensor.data_buffer_idx = 2;
    expect_model_refused(&s, 0, LY_E_FORMAT, "data_buffer_idx: 2 is out of range");
    s.values[5].u.tensor.data_buffer_idx = 1;
    s.program.constant_segment.segment_index = 5;
    expect_model_refused(&s, 0, LY_E_FORMAT, "constant_segment.segment_index: 5 is out of range");
    pte_sample_free(&s);
}

static void test_refuses_bad_tensors(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    ly_pte_tensor *t = &s.values[1].u.tensor;

    s.sizes[1][2] = -4;
    expect_model_refused(&s, 0, LY_E_FORMAT, "values[1](Tensor).sizes[2]: negative size -4");
    s.sizes[1][2] = 4;

    int32_t big[17];
    uint8_t order[17];
    for (int i = 0; i < 17; i++)
        big[i] = 1, order[i] = (uint8_t)i;
    t->sizes = big;
    t->n_sizes = 17;
    t->dim_order = order;
    t->n_dim_order = 17;
    expect_model_refused(&s, 0, LY_E_FORMAT, "rank 17 exceeds the limit of 16");
    t->sizes = s.sizes[1];
    t->n_sizes = 4;
    t->n_dim_order = 3;
    expect_model_refused(&s, 0, LY_E_FORMAT, "dim_order: 3 entries for 4 sizes");
    const uint8_t dup[4] = {0, 1, 1, 3};
    t->dim_order = dup;
    t->n_dim_order = 4;
    expect_model_refused(&s, 0, LY_E_FORMAT, "dim_order: not a permutation");
    t->dim_order = s.dim_order;

    t->scalar_type = 9;
    expect_model_refused(&s, 0, LY_E_FORMAT, "scalar_type: 9 is not a ScalarType");
    t->scalar_type = LY_PTE_FLOAT;
    t->storage_offset = 3;
    expect_model_refused(&s, 0, LY_E_FORMAT, "storage_offset: 3, expected 0");
    t->storage_offset = 0;
    t->shape_dynamism = LY_PTE_DYNAMIC_UNBOUND;
    expect_model_refused(&s, 0, LY_E_UNSUPPORTED, "DYNAMIC_UNBOUND");
    t->shape_dynamism = LY_PTE_STATIC;

    t->allocation_info.memory_offset_low = 2400; /* 256 bytes at 2400 in a 2560-byte buffer */
    expect_model_refused(&s, 0, LY_E_FORMAT, "do not fit planned buffer 1 of 2560 bytes");
    t->allocation_info.memory_offset_low = 256;
    t->allocation_info.memory_offset_high = 1;
    expect_model_refused(&s, 0, LY_E_FORMAT, "do not fit planned buffer");
    t->allocation_info.memory_offset_high = 0;
    t->allocation_info.memory_id = 0;
    expect_model_refused(&s, 0, LY_E_FORMAT, "memory_id: 0 is not a planned buffer (1..1)");
    t->allocation_info.memory_id = 2;
    expect_model_refused(&s, 0, LY_E_FORMAT, "memory_id: 2 is not a planned buffer");
    t->allocation_info.memory_id = 1;
    s.buffer_sizes[1] = -1;
    expect_model_refused(&s, 0, LY_E_FORMAT, "non_const_buffer_sizes[1]: negative size");
    s.buffer_sizes[1] = 2560;

    t->extra_tensor_info = (ly_pte_extra_tensor_info){true, 0, "w", 1};
    expect_model_refused(&s, 0, LY_E_UNSUPPORTED, "EXTERNAL");
    t->extra_tensor_info.present = false;

    const int32_t bad_list[2] = {0, 2}; /* value 2 is Null, not a Tensor */
    s.values[3].type = LY_PTE_EVALUE_TENSOR_LIST;
    s.values[3].u.tensor_list.items = bad_list;
    s.values[3].u.tensor_list.n_items = 2;
    expect_model_refused(&s, 0, LY_E_FORMAT, "values[3].items[1]: 2 is not the index of a Tensor");
    pte_sample_free(&s);
}

static void test_refuses_bad_methods(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_mixed(&s), LY_OK);
    static const ly_pte_compile_spec no_specs[1];
    s.delegate.compile_specs = no_specs; /* present, so that only the field under test is absent */

    s.plan.name = "main";
    expect_model_refused(&s, 0, LY_E_FORMAT,
                         "no method named \"forward\" (the program has 1: \"main\")");
    s.plan.name = LY_PTE_FORWARD;

    s.plan.chains = NULL;
    s.plan.n_chains = 0;
    expect_model_refused(&s, LY_PTE_ENC_OMIT_NULL, LY_E_FORMAT, "chains: missing");
    expect_model_refused(&s, 0, LY_E_FORMAT, "chains: empty");
    s.plan.chains = &s.chain;
    s.plan.n_chains = 1;

    s.delegate.compile_specs = NULL;
    expect_model_refused(&s, LY_PTE_ENC_OMIT_NULL, LY_E_FORMAT,
                         "delegates[0].compile_specs: missing");
    s.delegate.compile_specs = no_specs;
    s.plan.values = NULL;
    expect_model_refused(&s, LY_PTE_ENC_OMIT_NULL, LY_E_FORMAT, "values: missing");
    s.plan.values = s.values;
    s.program.execution_plan = NULL;
    expect_model_refused(&s, LY_PTE_ENC_OMIT_NULL, LY_E_FORMAT, "execution_plan: missing");
    s.program.execution_plan = &s.plan;

    s.instructions[1].u.kernel_call.op_index = 5;
    expect_model_refused(&s, 0, LY_E_FORMAT,
                         "instructions[1](KernelCall).op_index: 5 is out of range (2 operators)");
    s.instructions[1].u.kernel_call.op_index = 0;
    s.args[2][3] = 8;
    expect_model_refused(&s, 0, LY_E_FORMAT, "instructions[2].args[3]: 8 is out of range");
    s.args[2][3] = 7;
    s.instructions[1].u.kernel_call.args = NULL;
    expect_model_refused(&s, LY_PTE_ENC_OMIT_NULL, LY_E_FORMAT, "instructions[1].args: missing");
    s.instructions[1].u.kernel_call.args = s.args[1];
    s.instructions[0].u.delegate_call.delegate_index = 1;
    expect_model_refused(&s, 0, LY_E_FORMAT, "delegate_index: 1 is out of range (1 delegates)");
    s.instructions[0].u.delegate_call.delegate_index = 0;
    s.outputs[0] = 8;
    expect_model_refused(&s, 0, LY_E_FORMAT, "outputs[0]: 8 is out of range (8 values)");
    s.outputs[0] = 7;
    s.instructions[2] =
        (ly_pte_instruction){.type = LY_PTE_JUMP_FALSE_CALL, .u.jump_false_call = {6, 3}};
    expect_model_refused(&s, 0, LY_E_FORMAT, "destination_instruction: 3 is out of range");

    /* Union tags outside the schema. */
    s.instructions[2] = (ly_pte_instruction){.type = (ly_pte_instruction_type)9};
    expect_model_refused(&s, 0, LY_E_FORMAT, "instr_args_type: 9 is not an InstructionArguments");
    s.instructions[2].type = LY_PTE_KERNEL_CALL;
    s.values[6].type = (ly_pte_evalue_type)12;
    expect_model_refused(&s, 0, LY_E_FORMAT, "values[6].val_type: 12 is not a KernelTypes member");
    pte_sample_free(&s);
}

static void test_refuses_bad_xnnpack_payloads(void **state)
{
    (void)state;
    pte_sample s;
    assert_int_equal(pte_sample_delegated(&s), LY_OK);
    uint8_t *c = malloc(s.blob_size);
    assert_non_null(c);
    ly_xnn_graph *g = (ly_xnn_graph *)1;
#define XNN_REFUSED(bytes, n, needle)                                                              \
    do {                                                                                           \
        ly_status st_ = ly_xnn_decode(bytes, n, "blob", &g);                                       \
        if (st_ != LY_E_FORMAT || !strstr(ly_last_error(), needle))                                \
            fail_msg("expected \"%s\", got %s: %s", needle, ly_status_name(st_), ly_last_error()); \
        assert_null(g);                                                                            \
    } while (0)

    memcpy(c, s.blob, s.blob_size);
    memcpy(c + 36, "XN02", 4);
    XNN_REFUSED(c, s.blob_size, "identifier \"XN02\", expected \"XN00\" or \"XN01\"");
    memcpy(c, s.blob, s.blob_size);
    fb_st32(c + 14, (uint32_t)s.blob_size);
    XNN_REFUSED(c, s.blob_size, "lies outside the");
    memcpy(c, s.blob, s.blob_size);
    fb_st64(c + 22, 1);
    XNN_REFUSED(c, s.blob_size, "constant data of 1 bytes");
    memcpy(c, s.blob, s.blob_size);
    fb_st16(c + 8, 20);
    XNN_REFUSED(c, s.blob_size, "length 20 is too small");
    XNN_REFUSED(s.blob, 20, "truncated");
    for (size_t k = 0; k < s.blob_size; k++) {
        ly_status st = ly_xnn_decode(s.blob, k, "cut", &g);
        if (st == LY_OK) ly_xnn_graph_free(g); /* only trailing padding may go */
    }
    free(c);

    /* Structurally valid flatbuffers with inconsistent graphs. */
    uint8_t *b;
    size_t n;
    s.nodes[1].u.conv.filter_id = 6;
    assert_int_equal(ly_xnn_encode_unchecked(&s.graph, NULL, 0, &b, &n), LY_OK);
    XNN_REFUSED(b, n, "xnodes[1](XNNConv2d).filter_id: value id 6 is out of range (6 xvalues)");
    free(b);
    assert_int_equal(ly_xnn_encode(&s.graph, NULL, 0, &b, &n), LY_E_FORMAT);
    s.nodes[1].u.conv.filter_id = 2;
    s.nodes[1].u.conv.bias_id = LY_XNN_INVALID_ID; /* no bias is allowed */
    assert_int_equal(ly_xnn_encode(&s.graph, NULL, 0, &b, &n), LY_OK);
    free(b);
    s.nodes[1].u.conv.bias_id = 3;
    s.xvalues[4].tensor.id_out = 7;
    assert_int_equal(ly_xnn_encode_unchecked(&s.graph, NULL, 0, &b, &n), LY_OK);
    XNN_REFUSED(b, n, "xvalues[4].id_out: 7, expected its index 4");
    free(b);
    s.xvalues[4].tensor.id_out = 4;
    s.xvalues[4].tensor.num_dims = 3;
    assert_int_equal(ly_xnn_encode_unchecked(&s.graph, NULL, 0, &b, &n), LY_OK);
    XNN_REFUSED(b, n, "xvalues[4].dims: 4 entries, num_dims says 3");
    free(b);
    s.xvalues[4].tensor.num_dims = 4;
    s.nodes[0].u.transpose.n_perm = 3;
    assert_int_equal(ly_xnn_encode_unchecked(&s.graph, NULL, 0, &b, &n), LY_OK);
    XNN_REFUSED(b, n, "perm: 3 entries, expected 4");
    free(b);
    s.nodes[0].u.transpose.n_perm = 4;
    s.xvalues[5].tensor.external_id = 2;
    assert_int_equal(ly_xnn_encode_unchecked(&s.graph, NULL, 0, &b, &n), LY_OK);
    XNN_REFUSED(b, n, "xvalues[5].external_id: 2 is out of range (num_externs 2)");
    free(b);
    s.xvalues[5].tensor.external_id = 1;
    s.constants[1].named_key = NULL; /* inline, but the inline area is empty */
    assert_int_equal(ly_xnn_encode_unchecked(&s.graph, NULL, 0, &b, &n), LY_OK);
    XNN_REFUSED(b, n, "constant_data[1]: 432 bytes at offset");
    free(b);
    /* With the bytes inline it is valid. */
    s.constants[1].offset = 0;
    assert_int_equal(ly_xnn_encode(&s.graph, (const uint8_t *)s.weights, sizeof s.weights, &b, &n),
                     LY_OK);
    assert_int_equal(ly_xnn_decode(b, n, "inline", &g), LY_OK);
    assert_int_equal(g->constant_area.size, sizeof s.weights);
    assert_memory_equal(g->constant_area.data, s.weights, sizeof s.weights);
    assert_int_equal((uintptr_t)(g->constant_area.data - b) % 16, 0);
    ly_xnn_graph_free(g);
    free(b);
    s.nodes[1].type = (ly_xnn_node_type)48;
    assert_int_equal(ly_xnn_encode_unchecked(&s.graph, NULL, 0, &b, &n), LY_OK);
    XNN_REFUSED(b, n, "xnode_union_type: 48 is not an XNodeUnion member");
    free(b);
#undef XNN_REFUSED
    pte_sample_free(&s);
}

static void test_node_table(void **state)
{
    (void)state;
    /* Spot checks of the ET-1.2 union order. */
    assert_string_equal(ly_xnn_node_name(1), "XNNAdd");
    assert_string_equal(ly_xnn_node_name(7), "XNNConv2d");
    assert_string_equal(ly_xnn_node_name(14), "XNNMaxPooling2d");
    assert_string_equal(ly_xnn_node_name(32), "XNNConcatenate2");
    assert_string_equal(ly_xnn_node_name(38), "XNNConcatenate5");
    assert_string_equal(ly_xnn_node_name(47), "XNNCos");
    assert_string_equal(ly_xnn_node_name(0), "?");
    assert_string_equal(ly_xnn_node_name(48), "?");
    for (int t = 1; t < LY_XNN_NODE_TYPE_COUNT; t++)
        assert_int_not_equal(ly_xnn_node_kind_of(t), LY_XNN_KIND_INVALID);
    assert_int_equal(ly_pte_scalar_size(LY_PTE_FLOAT), 4);
    assert_int_equal(ly_pte_scalar_size(9), 0);
    assert_string_equal(ly_pte_scalar_name(LY_PTE_UINT64), "UINT64");

    /* Constants packed at 16-byte strides with the placeholder offset first. */
    const uint8_t a[5] = {1, 2, 3, 4, 5}, c[16] = {9};
    ly_pte_bytes t[3] = {{a, 5}, {c, 16}, {a, 0}};
    uint8_t *data;
    size_t size;
    uint64_t *offsets;
    assert_int_equal(ly_pte_pack_constants(t, 3, &data, &size, &offsets), LY_OK);
    assert_int_equal(size, 32);
    assert_int_equal(offsets[0], 0);
    assert_int_equal(offsets[1], 0);
    assert_int_equal(offsets[2], 16);
    assert_int_equal(offsets[3], 32);
    assert_memory_equal(data, a, 5);
    assert_int_equal(data[5], 0);
    assert_memory_equal(data + 16, c, 16);
    free(data);
    free(offsets);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_and_segment_layout),
        cmocka_unit_test(test_no_segments_no_header),
        cmocka_unit_test(test_roundtrip_delegated),
        cmocka_unit_test(test_roundtrip_mixed),
        cmocka_unit_test(test_roundtrip_all_kinds),
        cmocka_unit_test(test_flatc_decodes_our_files),
        cmocka_unit_test(test_reads_flatc_built_buffers),
        cmocka_unit_test(test_refuses_bad_header),
        cmocka_unit_test(test_refuses_bad_segments),
        cmocka_unit_test(test_refuses_bad_tensors),
        cmocka_unit_test(test_refuses_bad_methods),
        cmocka_unit_test(test_refuses_bad_xnnpack_payloads),
        cmocka_unit_test(test_node_table),
    };
    return cmocka_run_group_tests(tests, ly_test_scratch_setup, ly_test_scratch_teardown);
}
