/* SPDX-License-Identifier: MIT */
/* What multi-scale deformable attention becomes in an ExecuTorch program
 * (ops/op_export.h): a call of the custom operator docs/attention.md documents. */
#include "ops/op_export.h"

/* libreyolo::ms_deform_attn.out(value, spatial_shapes, sampling_locations,
 * attention_weights, num_points?, mode, *, out): the custom operator
 * docs/attention.md documents (the ms_deform_attn slot's contract). */
static void call_ms_deform_attn(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_ms_deform_attn_params *p = n->params;
    ly_lower_call_begin(L, k, LY_PTE_MS_DEFORM_ATTN);
    for (int i = 0; i < 4; i++)
        ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[i]));
    ly_pte_call_value(k, ly_lower_program_value(L, n->n_inputs > 4 ? n->inputs[4] : LY_GRAPH_NONE));
    ly_pte_call_int(k, p ? p->mode : 0);
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
}

LY_PORTABLE_EXPORT(ms_deform_attn, ly_lower_takes_ranked, call_ms_deform_attn);

/* aten::grid_sampler_2d.out(input, grid, interpolation_mode, padding_mode,
 * align_corners, *, out): ATen's own operator, which ExecuTorch's portable
 * kernel library implements. */
static void call_grid_sample(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_grid_sample_params *p = n->params;
    ly_lower_call_begin(L, k, LY_PTE_GRID_SAMPLER_2D);
    ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[0]));
    ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[1]));
    ly_pte_call_int(k, p ? p->mode : 0);
    ly_pte_call_int(k, p ? p->padding_mode : 0);
    ly_pte_call_bool(k, p ? p->align_corners != 0 : false);
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
}

LY_PORTABLE_EXPORT(grid_sample, ly_lower_takes_ranked, call_grid_sample);
