/* SPDX-License-Identifier: MIT */
/* A model graph lowered to an ExecuTorch program with the XNNPACK delegate:
 * the driver (see lower.h and lowering.h). */
#include "export/lowering.h"

/* The program: the instructions, values and memory plan made, with segments
 * [0] the constant segment, the delegate blobs, then one per named buffer. */
static ly_status encode(const ly_lowering *L, uint64_t planned, ly_lower_result *out)
{
    size_t n_segments = 1 + L->n_blobs + L->n_named;
    ly_pte_segment_in *segments = calloc(n_segments, sizeof *segments);
    ly_pte_named_data *named = calloc(L->n_named + 1, sizeof *named);
    if (!segments || !named) {
        free(segments);
        free(named);
        return ly_lower_oom();
    }
    for (size_t i = 0; i < L->n_blobs; i++)
        segments[1 + i] = (ly_pte_segment_in){L->blobs[i].data, L->blobs[i].size, 0};
    for (size_t i = 0; i < L->n_named; i++) {
        segments[1 + L->n_blobs + i] = (ly_pte_segment_in){L->named[i].data, L->named[i].size, 16};
        named[i] = (ly_pte_named_data){L->named[i].key, (uint32_t)(1 + L->n_blobs + i)};
    }
    static const uint64_t no_constants[1] = {0};
    segments[0] = (ly_pte_segment_in){L->const_seg, L->const_seg_size, 16};
    int64_t buffer_sizes[2] = {0, (int64_t)planned};
    ly_pte_chain chain = {.instructions = L->instr, .n_instructions = L->n_instr};
    ly_pte_plan plan = {.name = LY_PTE_FORWARD,
                        .has_container_meta_type = true,
                        .encoded_inp_str = "T2#1#0(T1#1($),D0())",
                        .encoded_out_str = "$",
                        .values = L->values.items,
                        .n_values = L->values.n,
                        .inputs = L->inputs,
                        .n_inputs = L->n_inputs,
                        .outputs = L->outputs,
                        .n_outputs = L->n_outputs,
                        .chains = &chain,
                        .n_chains = 1,
                        .operators = L->ops,
                        .n_operators = L->n_ops,
                        .delegates = L->delegates,
                        .n_delegates = L->n_delegates,
                        .non_const_buffer_sizes = buffer_sizes,
                        .n_non_const_buffer_sizes = 2};
    ly_pte_program program = {
        .version = 0,
        .execution_plan = &plan,
        .n_execution_plan = 1,
        .constant_segment = {.present = true,
                             .segment_index = 0,
                             .offsets = L->n_const_offsets ? L->const_offsets : no_constants,
                             .n_offsets = L->n_const_offsets ? L->n_const_offsets : 1},
        .named_data = named,
        .n_named_data = L->n_named};
    ly_status st = ly_pte_encode(&program, segments, n_segments, &out->program, &out->size);
    free(segments);
    free(named);
    if (st != LY_OK) return st;
    out->delegate_partitions = (int)L->n_delegates;
    out->kernel_calls = L->kernel_calls;
    return LY_OK;
}

ly_status ly_export_lower(ly_graph *g, const ly_tensor *shapes, const ly_lower_options *options,
                          ly_lower_result *out)
{
    if (!g || !shapes || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_lower: NULL argument");
    memset(out, 0, sizeof *out);
    ly_lowering L = {.g = g, .shape = shapes};
    ly_status st = LY_OK;
    L.n_nodes = ly_graph_node_count(g);
    L.n_values = ly_graph_value_count(g);
    L.nodes = calloc((size_t)L.n_nodes + 1, sizeof *L.nodes);
    L.producer = calloc((size_t)L.n_values + 1, sizeof *L.producer);
    L.known = calloc((size_t)L.n_values + 1, sizeof *L.known);
    L.exported = calloc((size_t)L.n_values + 1, sizeof *L.exported);
    L.pvalue = calloc((size_t)L.n_values + 1, sizeof *L.pvalue);
    L.inputs = calloc((size_t)ly_graph_input_count(g) + 1, sizeof *L.inputs);
    L.outputs = calloc((size_t)ly_graph_output_count(g) + 1, sizeof *L.outputs);
    if (!L.nodes || !L.producer || !L.known || !L.exported || !L.pvalue || !L.inputs ||
        !L.outputs) {
        st = ly_lower_oom();
        goto done;
    }
    for (int v = 0; v < L.n_values; v++) {
        L.producer[v] = -2;
        ly_graph_value_info info;
        st = ly_graph_value_at(g, v, &info);
        if (st != LY_OK) goto done;
        if (info.kind == LY_GRAPH_VALUE_CONSTANT) {
            const ly_tensor *data;
            st = ly_graph_constant_read(g, v, &data);
            if (st != LY_OK) goto done;
            L.producer[v] = LY_LOWER_CONSTANT;
            L.known[v] = data->data;
        }
    }
    for (int i = 0; i < ly_graph_input_count(g); i++) {
        ly_graph_value v;
        st = ly_graph_input_at(g, i, &v, NULL);
        if (st != LY_OK) goto done;
        L.producer[v] = -1;
    }
    for (int i = 0; i < L.n_nodes; i++) {
        st = ly_graph_node_at(g, i, &L.nodes[i].info);
        if (st != LY_OK) goto done;
        for (int k = 0; k < L.nodes[i].info.n_outputs; k++)
            L.producer[L.nodes[i].info.outputs[k]] = i;
    }
    for (int i = 0; i < L.n_nodes; i++) {
        st = ly_lower_classify(&L, &L.nodes[i]);
        if (st != LY_OK) goto done;
    }
    int n_out = options && options->outputs ? options->n_outputs : ly_graph_output_count(g);
    for (int i = 0; i < n_out; i++) {
        int index = options && options->outputs ? options->outputs[i] : i;
        ly_graph_value v;
        st = ly_graph_output_value(g, index, &v, NULL);
        if (st != LY_OK) goto done;
        L.exported[v] = true;
    }
    int parts = ly_lower_partition(&L);
    if (parts == 0) {
        st = ly_set_error(LY_E_UNSUPPORTED,
                          "ExecuTorch produced no XNNPACK delegate partitions. Refusing to label "
                          "a portable-kernel-only program as XNNPACK.");
        goto done;
    }
    st = ly_lower_program_values(&L);
    if (st != LY_OK) goto done;
    /* Portable nodes that read only graph inputs, then each partition followed
     * by the portable nodes that read it. */
    for (int level = -1; level < parts && st == LY_OK; level++) {
        if (level >= 0) {
            bool any = false;
            for (int i = 0; i < L.n_nodes; i++)
                if (!L.nodes[i].portable && !L.nodes[i].folded && L.nodes[i].part == level)
                    any = true;
            if (any) st = ly_lower_emit_partition(&L, level);
        }
        for (int i = 0; i < L.n_nodes && st == LY_OK; i++)
            if (L.nodes[i].portable && !L.nodes[i].folded && L.nodes[i].part == level)
                st = ly_lower_emit_portable(&L, &L.nodes[i],
                                            ly_portable_exports[L.nodes[i].info.op]);
    }
    if (st != LY_OK) goto done;
    for (int i = 0; i < n_out; i++) {
        int index = options && options->outputs ? options->outputs[i] : i;
        ly_graph_value v;
        st = ly_graph_output_value(g, index, &v, NULL);
        if (st != LY_OK) goto done;
        if (L.pvalue[v] < 0) {
            st = ly_set_error(LY_E_UNSUPPORTED, "export: output %d is a graph input or a constant",
                              index);
            goto done;
        }
        L.outputs[L.n_outputs++] = L.pvalue[v];
        ly_lower_touch(&L, L.pvalue[v], (int)L.n_instr);
    }
    uint64_t planned = 0;
    st = ly_lower_plan_memory(&L, &planned);
    if (st != LY_OK) goto done;

    st = encode(&L, planned, out);
done:
    if (L.mem.failed && st == LY_OK) st = ly_lower_oom();
    for (size_t i = 0; i < L.n_blobs; i++)
        free((void *)L.blobs[i].data);
    free(L.blobs);
    free(L.nodes);
    free(L.producer);
    free(L.known);
    free(L.exported);
    free(L.pvalue);
    free(L.inputs);
    free(L.outputs);
    ly_pte_values_free(&L.values);
    free(L.instr);
    free(L.delegates);
    free(L.named);
    free(L.pt);
    free(L.const_seg);
    free(L.const_offsets);
    ly_lower_arena_free(&L.mem);
    return st;
}
