/* SPDX-License-Identifier: MIT */
/* Which nodes are delegated, portable or folded (see lowering.h). */
#include "export/lowering.h"
#include "ops/ops_internal.h"

/* Whether the op's XNNPACK emitter covers this call: f32 operands, and what
 * the emitter itself asks. */
static bool xnn_takes(const ly_lowering *L, const ly_graph_node_info *n)
{
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != LY_GRAPH_NONE && L->shape[n->inputs[i]].dtype != LY_F32) return false;
    const ly_xnn_export *xnn = ly_xnn_exports[n->op];
    return !xnn->takes || xnn->takes(L, n);
}

/* ---- classification ------------------------------------------------------------------------ */

static ly_status no_mapping(const ly_lower_node *gn, const char *why)
{
    return ly_set_error(LY_E_UNSUPPORTED,
                        "export: node '%s': op '%s' has no ExecuTorch export mapping%s",
                        gn->info.name, ly_op_name(gn->info.op), why);
}

/* Fold a node whose result follows from shapes and constants (the manifest's
 * FOLD): its reference runs here and the program gets a constant. */
static ly_status fold(ly_lowering *L, ly_lower_node *gn)
{
    const ly_graph_node_info *n = &gn->info;
    ly_graph_value out = n->outputs[0];
    if (n->n_outputs != 1 || L->shape[out].dtype != LY_F32) return no_mapping(gn, " (folded)");
    ly_tensor in[LY_KERNEL_MAX_INPUTS], result = L->shape[out];
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.threads = 1;
    call.params = n->params;
    for (int i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] == LY_GRAPH_NONE) continue;
        in[i] = L->shape[n->inputs[i]];
        if (L->known[n->inputs[i]]) in[i].data = (void *)L->known[n->inputs[i]];
        call.in[i] = &in[i];
    }
    result.data = ly_lower_calloc(&L->mem, (size_t)ly_lower_numel(&result), sizeof(float));
    if (!result.data) return ly_lower_oom();
    call.out[0] = &result;
    ly_status st = ly_kernel_dispatch_op(n->op, &call);
    if (st != LY_OK) return st;
    gn->folded = true;
    L->known[out] = result.data;
    L->producer[out] = LY_LOWER_CONSTANT;
    return LY_OK;
}

/* Delegated, portable, folded, or no mapping (an error naming the op). */
ly_status ly_lower_classify(ly_lowering *L, ly_lower_node *gn)
{
    const ly_graph_node_info *n = &gn->info;
    const ly_op_def *def = ly_op_def_of(n->op);
    for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
        ly_graph_value v = i < n->n_inputs ? n->inputs[i] : n->outputs[i - n->n_inputs];
        if (v != LY_GRAPH_NONE && L->shape[v].dtype != LY_F32 && L->shape[v].dtype != LY_I64)
            return no_mapping(gn, " for these operands (program tensors are f32 or i64)");
    }
    const ly_portable_export *portable = ly_portable_exports[n->op];
    switch (def ? def->lower : LY_LOWER_NONE) {
    case LY_LOWER_FOLD:
        return fold(L, gn);
    case LY_LOWER_PORTABLE:
        gn->portable = true;
        return portable->takes(L, n) ? LY_OK : no_mapping(gn, " for these operands");
    case LY_LOWER_EITHER:
        if (portable->takes(L, n)) {
            gn->portable = true;
            return LY_OK;
        }
        /* fall through */
    case LY_LOWER_XNN:
        return xnn_takes(L, n) ? LY_OK : no_mapping(gn, " for these operands");
    case LY_LOWER_NONE:
        break;
    }
    return no_mapping(gn, "");
}
