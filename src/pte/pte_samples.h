/* SPDX-License-Identifier: MIT */
/*
 * Two small, valid `.pte` programs built with the pte.h model, for tests (header-only, not part
 * of the library). They also show how an exporter fills the model:
 *
 *  - pte_sample_delegated: the minimal fully delegated program of spec B4. One DelegateCall to
 *    XnnpackBackend running transpose(NCHW->NHWC) -> conv 3->4 k3 p1 + bias, clamp 0..6 ->
 *    transpose back, on a [1,3,8,8] input. Weights in named data (keys "<name>_<sha256>"),
 *    delegate blob in segment 1, empty constant segment 0.
 *  - pte_sample_mixed: a DelegateCall (XNNPACK sigmoid) followed by two KernelCalls through the
 *    operator table (aten::upsample_nearest2d.vec_out, aten::add.out) reading a constant tensor
 *    from the constant segment: Null, DoubleList and Int arguments included.
 *
 * The sample struct owns every array the model points at, so it must stay where it is while
 * `program` is used; pte_sample_free releases the malloc'd parts.
 */
#ifndef LY_PTE_SAMPLES_H
#define LY_PTE_SAMPLES_H

#include "pte/pte.h"

#include <stdlib.h>
#include <string.h>

typedef struct pte_sample {
    ly_pte_program program;
    ly_pte_plan plan;
    ly_pte_evalue values[8];
    int32_t sizes[8][4];
    uint8_t dim_order[4];
    int32_t inputs[1], outputs[1];
    ly_pte_chain chain;
    ly_pte_instruction instructions[3];
    int32_t args[3][4];
    ly_pte_operator operators[2];
    ly_pte_delegate delegate;
    int64_t buffer_sizes[2];
    uint64_t constant_offsets[2];
    double scales[2];
    ly_pte_named_data named[2];
    char keys[2][96];
    ly_pte_segment_in segments[4];
    size_t n_segments;
    /* The XNNPACK graph. */
    ly_xnn_graph graph;
    ly_xnn_node nodes[3];
    ly_xnn_value xvalues[6];
    uint32_t xdims[6][4];
    uint32_t perm_in[4], perm_out[4];
    uint32_t input_ids[1], output_ids[1];
    ly_xnn_constant_data constants[3];
    /* Data. */
    float weights[4 * 3 * 3 * 3], bias[4];
    uint8_t *blob; /* the encoded delegate payload (malloc) */
    size_t blob_size;
} pte_sample;

static inline void pte_sample_free(pte_sample *s)
{
    free(s->blob);
    s->blob = NULL;
}

static inline void pte_sample_tensor(pte_sample *s, int i, int32_t n, int32_t c, int32_t h,
                                     int32_t w)
{
    int32_t *sz = s->sizes[i];
    sz[0] = n, sz[1] = c, sz[2] = h, sz[3] = w;
    ly_pte_evalue *v = &s->values[i];
    v->type = LY_PTE_EVALUE_TENSOR;
    v->u.tensor.scalar_type = LY_PTE_FLOAT;
    v->u.tensor.sizes = sz;
    v->u.tensor.n_sizes = 4;
    v->u.tensor.dim_order = s->dim_order;
    v->u.tensor.n_dim_order = 4;
}

static inline void pte_sample_planned(pte_sample *s, int i, uint32_t offset)
{
    ly_pte_allocation *a = &s->values[i].u.tensor.allocation_info;
    a->present = true;
    a->memory_id = 1;
    a->memory_offset_low = offset;
}

static inline void pte_sample_xtensor(pte_sample *s, int i, uint32_t d0, uint32_t d1, uint32_t d2,
                                      uint32_t d3, uint32_t ndims)
{
    uint32_t *d = s->xdims[i];
    d[0] = d0, d[1] = d1, d[2] = d2, d[3] = d3;
    ly_xnn_value *v = &s->xvalues[i];
    v->type = LY_XNN_TENSOR_VALUE;
    v->tensor.datatype = LY_XNN_DT_FP32;
    v->tensor.num_dims = ndims;
    v->tensor.dims = d;
    v->tensor.n_dims = ndims;
    v->tensor.external_id = LY_XNN_INVALID_ID;
    v->tensor.id_out = (uint32_t)i;
}

static inline void pte_sample_common(pte_sample *s)
{
    for (int i = 0; i < 4; i++)
        s->dim_order[i] = (uint8_t)i;
    s->plan.name = LY_PTE_FORWARD;
    s->plan.values = s->values;
    s->plan.inputs = s->inputs;
    s->plan.n_inputs = 1;
    s->plan.outputs = s->outputs;
    s->plan.n_outputs = 1;
    s->plan.chains = &s->chain;
    s->plan.n_chains = 1;
    s->plan.operators = s->operators;
    s->plan.delegates = &s->delegate;
    s->plan.n_delegates = 1;
    s->plan.non_const_buffer_sizes = s->buffer_sizes;
    s->plan.n_non_const_buffer_sizes = 2;
    s->chain.instructions = s->instructions;
    s->delegate.id = LY_PTE_XNNPACK_BACKEND_ID;
    s->delegate.location = LY_PTE_SEGMENT;
    s->delegate.index = 1;
    s->program.execution_plan = &s->plan;
    s->program.n_execution_plan = 1;
    s->program.constant_segment.present = true;
    s->program.constant_segment.segment_index = 0;
    s->program.constant_segment.offsets = s->constant_offsets;
    s->program.constant_segment.n_offsets = 1;
    s->graph.version = "0";
    s->graph.xnodes = s->nodes;
    s->graph.xvalues = s->xvalues;
    s->graph.input_ids = s->input_ids;
    s->graph.n_input_ids = 1;
    s->graph.output_ids = s->output_ids;
    s->graph.n_output_ids = 1;
    s->graph.constant_data = s->constants;
    s->graph.n_constant_data = 1; /* [0] = {0, 0}: the placeholder */
    s->graph.num_externs = 2;
}

/* The externals of a graph: value 0 is input 0, value `out` is output 1. */
static inline void pte_sample_externals(pte_sample *s, int out)
{
    s->xvalues[0].tensor.external_id = 0;
    s->xvalues[0].tensor.flags = LY_XNN_FLAG_EXTERNAL_INPUT;
    s->xvalues[out].tensor.external_id = 1;
    s->xvalues[out].tensor.flags = LY_XNN_FLAG_EXTERNAL_OUTPUT;
    s->input_ids[0] = 0;
    s->output_ids[0] = (uint32_t)out;
}

static inline ly_status pte_sample_delegated(pte_sample *s)
{
    memset(s, 0, sizeof *s);
    pte_sample_common(s);
    for (int i = 0; i < 108; i++)
        s->weights[i] = (float)((i * 37) % 17 - 8) / 16.0f;
    for (int i = 0; i < 4; i++)
        s->bias[i] = 0.25f * (float)i - 0.5f;

    /* XNNPACK graph: 0 in NCHW, 1 NHWC, 2 filter, 3 bias, 4 conv out NHWC, 5 out NCHW. */
    pte_sample_xtensor(s, 0, 1, 3, 8, 8, 4);
    pte_sample_xtensor(s, 1, 1, 8, 8, 3, 4);
    pte_sample_xtensor(s, 2, 4, 3, 3, 3, 4);
    pte_sample_xtensor(s, 3, 4, 0, 0, 0, 1);
    pte_sample_xtensor(s, 4, 1, 8, 8, 4, 4);
    pte_sample_xtensor(s, 5, 1, 4, 8, 8, 4);
    pte_sample_externals(s, 5);
    s->xvalues[2].tensor.constant_buffer_idx = 1;
    s->xvalues[3].tensor.constant_buffer_idx = 2;
    s->graph.n_xvalues = 6;
    ly_status st = ly_pte_named_key("p_conv_weight", s->weights, sizeof s->weights, s->keys[0],
                                    sizeof s->keys[0]);
    if (st == LY_OK)
        st =
            ly_pte_named_key("p_conv_bias", s->bias, sizeof s->bias, s->keys[1], sizeof s->keys[1]);
    if (st != LY_OK) return st;
    s->constants[1] = (ly_xnn_constant_data){UINT64_MAX, sizeof s->weights, s->keys[0]};
    s->constants[2] = (ly_xnn_constant_data){UINT64_MAX, sizeof s->bias, s->keys[1]};
    s->graph.n_constant_data = 3;

    const uint32_t to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
    memcpy(s->perm_in, to_nhwc, sizeof to_nhwc);
    memcpy(s->perm_out, to_nchw, sizeof to_nchw);
    ly_xnn_node *n = s->nodes;
    n[0].type = LY_XNN_STATIC_TRANSPOSE;
    n[0].u.transpose.num_dims = 4;
    n[0].u.transpose.perm = s->perm_in;
    n[0].u.transpose.n_perm = 4;
    n[0].u.transpose.input_id = 0;
    n[0].u.transpose.output_id = 1;
    n[1].type = LY_XNN_CONV2D;
    n[1].debug_handle = 1;
    n[1].has_output_min_max = true;
    n[1].output_min = 0.0f;
    n[1].output_max = 6.0f;
    n[1].u.conv.padding_top = n[1].u.conv.padding_right = 1;
    n[1].u.conv.padding_bottom = n[1].u.conv.padding_left = 1;
    n[1].u.conv.kernel_height = n[1].u.conv.kernel_width = 3;
    n[1].u.conv.subsampling_height = n[1].u.conv.subsampling_width = 1;
    n[1].u.conv.dilation_height = n[1].u.conv.dilation_width = 1;
    n[1].u.conv.group_input_channels = 3;
    n[1].u.conv.group_output_channels = 4;
    n[1].u.conv.groups = 1;
    n[1].u.conv.input1_id = 1;
    n[1].u.conv.filter_id = 2;
    n[1].u.conv.bias_id = 3;
    n[1].u.conv.output_id = 4;
    n[2].type = LY_XNN_STATIC_TRANSPOSE;
    n[2].debug_handle = 2;
    n[2].u.transpose.num_dims = 4;
    n[2].u.transpose.perm = s->perm_out;
    n[2].u.transpose.n_perm = 4;
    n[2].u.transpose.input_id = 4;
    n[2].u.transpose.output_id = 5;
    s->graph.n_xnodes = 3;
    if ((st = ly_xnn_encode(&s->graph, NULL, 0, &s->blob, &s->blob_size)) != LY_OK) return st;

    /* Program: T_in [1,3,8,8] at 0, T_out [1,4,8,8] at 768 in planned buffer 1. */
    pte_sample_tensor(s, 0, 1, 3, 8, 8);
    pte_sample_planned(s, 0, 0);
    pte_sample_tensor(s, 1, 1, 4, 8, 8);
    pte_sample_planned(s, 1, 768);
    s->plan.n_values = 2;
    s->inputs[0] = 0;
    s->outputs[0] = 1;
    s->buffer_sizes[1] = 768 + 1024;
    s->args[0][0] = 0;
    s->args[0][1] = 1;
    s->instructions[0].type = LY_PTE_DELEGATE_CALL;
    s->instructions[0].u.delegate_call.delegate_index = 0;
    s->instructions[0].u.delegate_call.args = s->args[0];
    s->instructions[0].u.delegate_call.n_args = 2;
    s->chain.n_instructions = 1;
    s->named[0] = (ly_pte_named_data){s->keys[0], 2};
    s->named[1] = (ly_pte_named_data){s->keys[1], 3};
    s->program.named_data = s->named;
    s->program.n_named_data = 2;
    s->segments[0] = (ly_pte_segment_in){NULL, 0, 0};
    s->segments[1] = (ly_pte_segment_in){s->blob, s->blob_size, 0};
    s->segments[2] = (ly_pte_segment_in){(const uint8_t *)s->weights, sizeof s->weights, 16};
    s->segments[3] = (ly_pte_segment_in){(const uint8_t *)s->bias, sizeof s->bias, 16};
    s->n_segments = 4;
    return LY_OK;
}

static inline ly_status pte_sample_mixed(pte_sample *s)
{
    memset(s, 0, sizeof *s);
    pte_sample_common(s);
    for (int i = 0; i < 4; i++)
        s->bias[i] = (float)i - 1.5f;

    pte_sample_xtensor(s, 0, 1, 4, 4, 4, 4);
    pte_sample_xtensor(s, 1, 1, 4, 4, 4, 4);
    pte_sample_externals(s, 1);
    s->graph.n_xvalues = 2;
    s->nodes[0].type = LY_XNN_SIGMOID;
    s->nodes[0].u.n1x1.input_id = 0;
    s->nodes[0].u.n1x1.output_id = 1;
    s->graph.n_xnodes = 1;
    ly_status st = ly_xnn_encode(&s->graph, NULL, 0, &s->blob, &s->blob_size);
    if (st != LY_OK) return st;

    /* 0 in, 1 sigmoid out, 2 None, 3 scales, 4 upsampled, 5 constant, 6 alpha, 7 out. */
    pte_sample_tensor(s, 0, 1, 4, 4, 4);
    pte_sample_planned(s, 0, 0);
    pte_sample_tensor(s, 1, 1, 4, 4, 4);
    pte_sample_planned(s, 1, 256);
    s->values[2].type = LY_PTE_EVALUE_NULL;
    s->scales[0] = s->scales[1] = 2.0;
    s->values[3].type = LY_PTE_EVALUE_DOUBLE_LIST;
    s->values[3].u.double_list.items = s->scales;
    s->values[3].u.double_list.n_items = 2;
    pte_sample_tensor(s, 4, 1, 4, 8, 8);
    pte_sample_planned(s, 4, 512);
    pte_sample_tensor(s, 5, 1, 4, 1, 1);
    s->values[5].u.tensor.data_buffer_idx = 1;
    s->values[6].type = LY_PTE_EVALUE_INT;
    s->values[6].u.int_val = 1;
    pte_sample_tensor(s, 7, 1, 4, 8, 8);
    pte_sample_planned(s, 7, 1536);
    s->plan.n_values = 8;
    s->inputs[0] = 0;
    s->outputs[0] = 7;
    s->buffer_sizes[1] = 2560;

    const int32_t call[3][4] = {{0, 1}, {1, 2, 3, 4}, {4, 5, 6, 7}};
    memcpy(s->args, call, sizeof call);
    s->instructions[0].type = LY_PTE_DELEGATE_CALL;
    s->instructions[0].u.delegate_call.args = s->args[0];
    s->instructions[0].u.delegate_call.n_args = 2;
    s->instructions[1].type = LY_PTE_KERNEL_CALL;
    s->instructions[1].u.kernel_call.op_index = 0;
    s->instructions[1].u.kernel_call.args = s->args[1];
    s->instructions[1].u.kernel_call.n_args = 4;
    s->instructions[2].type = LY_PTE_KERNEL_CALL;
    s->instructions[2].u.kernel_call.op_index = 1;
    s->instructions[2].u.kernel_call.args = s->args[2];
    s->instructions[2].u.kernel_call.n_args = 4;
    s->chain.n_instructions = 3;
    s->operators[0] = (ly_pte_operator){"aten::upsample_nearest2d", "vec_out"};
    s->operators[1] = (ly_pte_operator){"aten::add", "out"};
    s->plan.n_operators = 2;
    s->plan.has_container_meta_type = true;
    s->plan.encoded_inp_str = "T2#1#1($,L1#1($))";
    s->plan.encoded_out_str = "L1#1($)";

    /* Constant segment: offsets[1] = 0 holds the 16-byte constant. */
    s->program.constant_segment.n_offsets = 2;
    s->constant_offsets[1] = 0;
    s->segments[0] = (ly_pte_segment_in){(const uint8_t *)s->bias, sizeof s->bias, 0};
    s->segments[1] = (ly_pte_segment_in){s->blob, s->blob_size, 0};
    s->n_segments = 2;
    return LY_OK;
}

/* Encode a sample (checked, as an exporter would). */
static inline ly_status pte_sample_encode(const pte_sample *s, uint8_t **bytes, size_t *size)
{
    return ly_pte_encode(&s->program, s->segments, s->n_segments, bytes, size);
}

#endif
