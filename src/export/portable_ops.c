/* SPDX-License-Identifier: MIT */
/*
 * What each op the manifest marks PORTABLE (or EITHER) becomes between
 * partitions: its ly_portable_export_<name> (lowering.h), the operands
 * its kernel takes and its KernelCall, whose arguments go through the
 * operator's row of src/pte/op_schema.h (the one our runtime checks them
 * against), then the instruction itself.
 */
#include "export/lowering.h"

static bool takes_4d(const ly_lowering *L, const ly_graph_node_info *n)
{
    return ly_lower_is_4d(L, n->inputs[0]);
}

static bool takes_any_rank(const ly_lowering *L, const ly_graph_node_info *n)
{
    return L->shape[n->inputs[0]].ndim >= 1;
}

/* upsample_nearest2d.vec_out(input, output_size?, scale_factors?, *, out) */
static void call_upsample(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    double scale = (double)((const ly_upsample_nearest2d_params *)n->params)->scale;
    const double scales[2] = {scale, scale};
    ly_pte_call_begin(k, LY_PTE_UPSAMPLE_NEAREST2D, &L->values);
    ly_pte_call_value(k, L->pvalue[n->inputs[0]]);
    ly_pte_call_none(k);
    ly_pte_call_double_list(k, 2, scales);
    ly_pte_call_out(k, L->pvalue[n->outputs[0]]);
}

LY_PORTABLE_EXPORT(upsample_nearest2d, takes_4d, call_upsample);

/* XNNPACK's average pooling leaves padding out of the count: a pooling that
 * counts it runs as the portable kernel. */
static bool takes_avg_pool(const ly_lowering *L, const ly_graph_node_info *n)
{
    const ly_pool2d_params *p = n->params;
    return p->count_include_pad && (p->padding[0] > 0 || p->padding[1] > 0) &&
           ly_lower_is_4d(L, n->inputs[0]);
}

/* avg_pool2d.out(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
 * divisor_override?, *, out) */
static void call_avg_pool(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_pool2d_params *pool = n->params;
    ly_pte_call_begin(k, LY_PTE_AVG_POOL2D, &L->values);
    ly_pte_call_value(k, L->pvalue[n->inputs[0]]);
    ly_pte_call_int_list(k, 2, pool->kernel);
    ly_pte_call_int_list(k, 2, pool->stride);
    ly_pte_call_int_list(k, 2, pool->padding);
    ly_pte_call_bool(k, false);
    ly_pte_call_bool(k, pool->count_include_pad != 0);
    ly_pte_call_none(k);
    ly_pte_call_out(k, L->pvalue[n->outputs[0]]);
}

LY_PORTABLE_EXPORT(avg_pool2d, takes_avg_pool, call_avg_pool);

/* native_layer_norm.out(input, normalized_shape, weight?, bias?, eps, *, out0,
 * out1, out2): what layer_norm decomposes to in the edge dialect; out1 and
 * out2 (mean and 1/std, [..., 1]) are program tensors nothing else reads. */
static void call_layer_norm(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_tensor *x = &L->shape[n->inputs[0]];
    const ly_norm_params *p = n->params;
    ly_tensor stats = *x;
    stats.shape[x->ndim - 1] = 1;
    ly_pte_call_begin(k, LY_PTE_NATIVE_LAYER_NORM, &L->values);
    ly_pte_call_value(k, L->pvalue[n->inputs[0]]);
    ly_pte_call_int_list(k, 1, &x->shape[x->ndim - 1]);
    ly_pte_call_value(k, ly_lower_program_value(L, n->n_inputs > 1 ? n->inputs[1] : LY_GRAPH_NONE));
    ly_pte_call_value(k, ly_lower_program_value(L, n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE));
    ly_pte_call_double(k, p ? p->eps : 1e-5);
    ly_pte_call_out(k, L->pvalue[n->outputs[0]]);
    ly_pte_call_out(k, ly_lower_tensor_value(L, &stats));
    ly_pte_call_out(k, ly_lower_tensor_value(L, &stats));
}

LY_PORTABLE_EXPORT(layer_norm, takes_any_rank, call_layer_norm);

/* topk.values(self, k, dim, largest, sorted, *, values, indices) */
static void call_topk(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_topk_params *p = n->params;
    ly_pte_call_begin(k, LY_PTE_TOPK, &L->values);
    ly_pte_call_value(k, L->pvalue[n->inputs[0]]);
    ly_pte_call_int(k, p->k);
    ly_pte_call_int(k, p->axis);
    ly_pte_call_bool(k, p->largest != 0);
    ly_pte_call_bool(k, true);
    ly_pte_call_out(k, L->pvalue[n->outputs[0]]);
    ly_pte_call_out(k, L->pvalue[n->outputs[1]]);
}

LY_PORTABLE_EXPORT(topk, takes_any_rank, call_topk);

/* index_select.out(self, dim, index, *, out) */
static void call_index_select(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_gather_params *p = n->params;
    ly_pte_call_begin(k, LY_PTE_INDEX_SELECT, &L->values);
    ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[0]));
    ly_pte_call_int(k, p->axis);
    ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[1]));
    ly_pte_call_out(k, L->pvalue[n->outputs[0]]);
}

LY_PORTABLE_EXPORT(index_select, takes_any_rank, call_index_select);

/* A reshape of indices runs between portable kernels; of floats, in XNNPACK. */
static bool takes_indices(const ly_lowering *L, const ly_graph_node_info *n)
{
    return L->shape[n->inputs[0]].dtype != LY_F32;
}

/* view_copy.out(self, size, *, out) */
static void call_view_copy(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_tensor *o = &L->shape[n->outputs[0]];
    ly_pte_call_begin(k, LY_PTE_VIEW_COPY, &L->values);
    ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[0]));
    ly_pte_call_int_list(k, o->ndim, o->shape);
    ly_pte_call_out(k, L->pvalue[n->outputs[0]]);
}

LY_PORTABLE_EXPORT(reshape, takes_indices, call_view_copy);

/* libreyolo::ms_deform_attn.out(value, spatial_shapes, sampling_locations,
 * attention_weights, num_points?, mode, *, out): the custom operator
 * docs/attention.md documents (the ms_deform_attn slot's contract). */
static void call_ms_deform_attn(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_ms_deform_attn_params *p = n->params;
    ly_pte_call_begin(k, LY_PTE_MS_DEFORM_ATTN, &L->values);
    for (int i = 0; i < 4; i++)
        ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[i]));
    ly_pte_call_value(k, ly_lower_program_value(L, n->n_inputs > 4 ? n->inputs[4] : LY_GRAPH_NONE));
    ly_pte_call_int(k, p ? p->mode : 0);
    ly_pte_call_out(k, L->pvalue[n->outputs[0]]);
}

LY_PORTABLE_EXPORT(ms_deform_attn, takes_any_rank, call_ms_deform_attn);

/* ---- the instruction ------------------------------------------------------------------ */

ly_status ly_lower_emit_portable(ly_lowering *L, const ly_lower_node *gn,
                                 const ly_portable_export *e)
{
    const ly_graph_node_info *n = &gn->info;
    ly_pte_call k;
    e->call(L, n, &k);
    size_t n_args = 0;
    ly_status st = ly_pte_call_finish(&k, &n_args);
    if (st != LY_OK) return st;
    int op = ly_lower_operator(L, k.schema->name, k.schema->overload);
    ly_pte_instruction *ins = ly_lower_instruction(L);
    int32_t *args = ly_lower_calloc(&L->mem, n_args, sizeof *args);
    if (op < 0 || !ins || !args) return ly_lower_oom();
    memcpy(args, k.args, n_args * sizeof *args);
    int at = (int)L->n_instr - 1;
    ins->type = LY_PTE_KERNEL_CALL;
    ins->u.kernel_call.op_index = op;
    ins->u.kernel_call.args = args;
    ins->u.kernel_call.n_args = n_args;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != LY_GRAPH_NONE && !L->known[n->inputs[i]])
            ly_lower_touch(L, L->pvalue[n->inputs[i]], at);
    for (int i = 0; i < k.schema->n_outs; i++)
        ly_lower_touch(L, k.args[k.schema->n_args + i], at);
    L->kernel_calls++;
    return LY_OK;
}
