/* SPDX-License-Identifier: MIT */
/* What the index ops become in an ExecuTorch program (ops/op_export.h):
 * portable calls. */
#include "ops/op_export.h"

/* topk.values(self, k, dim, largest, sorted, *, values, indices) */
static void call_topk(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_topk_params *p = n->params;
    ly_lower_call_begin(L, k, LY_PTE_TOPK);
    ly_pte_call_value(k, ly_lower_pvalue(L, n->inputs[0]));
    ly_pte_call_int(k, p->k);
    ly_pte_call_int(k, p->axis);
    ly_pte_call_bool(k, p->largest != 0);
    ly_pte_call_bool(k, true);
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[1]));
}

LY_PORTABLE_EXPORT(topk, ly_lower_takes_ranked, call_topk);

/* index_select.out(self, dim, index, *, out) */
static void call_index_select(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_gather_params *p = n->params;
    ly_lower_call_begin(L, k, LY_PTE_INDEX_SELECT);
    ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[0]));
    ly_pte_call_int(k, p->axis);
    ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[1]));
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
}

/* A batch's per-image selection is ATen's index_select at batch 1 only. */
static bool takes_index_select(const ly_lowering *L, const ly_graph_node_info *n)
{
    const ly_gather_params *p = n->params;
    return ly_lower_takes_ranked(L, n) &&
           (!p->per_image || ly_lower_shape(L, n->inputs[0])->shape[0] == 1);
}

LY_PORTABLE_EXPORT(index_select, takes_index_select, call_index_select);
