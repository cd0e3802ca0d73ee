/* SPDX-License-Identifier: MIT */
/*
 * A portable node's instruction: its op's ly_portable_export_<name> (in the
 * op's folder, ops/op_export.h) gives the call's arguments on its operator's
 * row of src/pte/op_schema.h, the row our runtime checks calls against; here
 * they become a KernelCall, and its operands' live ranges grow to it.
 */
#include "export/lowering.h"

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
