/* SPDX-License-Identifier: MIT */
/* Partitions, and one partition as an XNNGraph and its DelegateCall (see
 * lowering.h): its externals, its nodes by their ops' emitters, and the
 * channels-last outputs brought back to the logical order. */
#include "export/lowering.h"

#include <stdio.h>

/* ---- partitions ---------------------------------------------------------------- */

/* Partitions in dependency order: a delegated node goes after every portable
 * node it depends on; a portable node runs after the partitions it reads. */
int ly_lower_partition(ly_lowering *L)
{
    int parts = 0;
    for (int i = 0; i < L->n_nodes; i++) {
        ly_lower_node *gn = &L->nodes[i];
        if (gn->folded) continue;
        ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
        int k = ly_lower_node_inputs(L, &gn->info, ins);
        int p = gn->portable ? -1 : 0;
        for (int j = 0; j < k; j++) {
            int src = L->producer[ins[j]];
            if (src < 0) continue;
            const ly_lower_node *s = &L->nodes[src];
            int need = gn->portable ? s->part : s->portable ? s->part + 1 : s->part;
            if (need > p) p = need;
        }
        gn->part = p;
        if (!gn->portable && p + 1 > parts) parts = p + 1;
    }
    return parts;
}

/* Whether XNNPACK packs operand k of this node into storage of its own when
 * its runtime is made: the filters and biases of convolutions and
 * fully-connected layers (and the DFL
 * projection, which its emitter makes itself). Only those constants may live
 * inside a partition: ExecuTorch before 1.4.1 frees every constant it loaded
 * from named data once the runtime exists, and an elementwise node keeps a
 * pointer to its constant operand and reads it on every run. Every other
 * known operand (anchors, strides, scales, masks, position embeddings) is an
 * input of the delegate, fed from a program-level constant. */
static bool packs_operand(ly_op op, int k)
{
    return (op == LY_OP_CONV2D || op == LY_OP_LINEAR) && (k == 1 || k == 2);
}

/* One delegated node's XNNPACK nodes, by its op's emitter. */
static ly_status emit(ly_xnn_builder *x, const ly_lower_node *gn)
{
    const ly_graph_node_info *n = &gn->info;
    x->node_name = n->name;
    ly_xnn_exports[n->op]->emit(x, n);
    return x->st;
}

static bool in_list(const int *list, size_t n, int v)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == v) return true;
    return false;
}

/* Build partition `part` as an XNNGraph, encode it, and emit its DelegateCall. */
ly_status ly_lower_emit_partition(ly_lowering *L, int part)
{
    ly_xnn_builder x = {.L = L, .part = part, .arange_id = NONE_ID};
    ly_status st = LY_OK;
    x.xid = calloc((size_t)L->n_values, sizeof *x.xid);
    x.ext_in = calloc((size_t)L->n_values, sizeof *x.ext_in);
    x.ext_out = calloc((size_t)L->n_values, sizeof *x.ext_out);
    x.in_ids = calloc((size_t)L->n_values, sizeof *x.in_ids);
    x.out_ids = calloc((size_t)L->n_values, sizeof *x.out_ids);
    if (!x.xid || !x.ext_in || !x.ext_out || !x.in_ids || !x.out_ids ||
        !LY_LOWER_GROW(x.c, x.n_c, x.cap_c)) {
        st = ly_lower_oom();
        goto done;
    }
    for (int v = 0; v < L->n_values; v++)
        x.xid[v][0] = x.xid[v][1] = NONE_ID;
    x.c[x.n_c++] = (ly_xnn_constant_data){0, 0, NULL};

    /* Externals: inputs in first-use order, then outputs in definition order. */
    for (int i = 0; i < L->n_nodes; i++) {
        const ly_lower_node *gn = &L->nodes[i];
        if (gn->portable || gn->folded || gn->part != part) continue;
        ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
        int k = ly_lower_node_inputs(L, &gn->info, ins);
        for (int j = 0; j < k; j++) {
            int src = L->producer[ins[j]];
            bool inside = src >= 0 && !L->nodes[src].portable && L->nodes[src].part == part;
            if (!inside && !in_list(x.ext_in, x.n_in, ins[j])) x.ext_in[x.n_in++] = ins[j];
        }
        for (int j = 0; j < gn->info.n_inputs; j++) {
            ly_graph_value v = gn->info.inputs[j];
            if (v == LY_GRAPH_NONE || !L->known[v] || packs_operand(gn->info.op, j)) continue;
            if (in_list(x.ext_in, x.n_in, v)) continue;
            if (L->pvalue[v] < 0) L->pvalue[v] = ly_lower_constant_value(L, v);
            if (L->pvalue[v] < 0) {
                st = ly_lower_oom();
                goto done;
            }
            x.ext_in[x.n_in++] = v;
        }
    }
    for (int i = 0; i < L->n_nodes; i++) {
        const ly_lower_node *gn = &L->nodes[i];
        if (gn->portable || gn->folded || gn->part != part) continue;
        ly_graph_value v = gn->info.outputs[0];
        bool leaves = L->exported[v];
        for (int j = 0; j < L->n_nodes && !leaves; j++) {
            const ly_lower_node *c = &L->nodes[j];
            if (c->folded || (!c->portable && c->part == part)) continue;
            ly_graph_value ins[LY_KERNEL_MAX_INPUTS];
            int k = ly_lower_node_inputs(L, &c->info, ins);
            for (int m = 0; m < k; m++)
                if (ins[m] == v) leaves = true;
        }
        if (leaves) x.ext_out[x.n_out++] = v;
    }
    for (size_t i = 0; i < x.n_in; i++) {
        uint32_t dims[LY_MAX_DIMS] = {0};
        int nd = ly_xb_dims(&L->shape[x.ext_in[i]], LOGICAL, dims);
        x.in_ids[i] = ly_xb_value(&x, nd, dims, (uint32_t)i, LY_XNN_FLAG_EXTERNAL_INPUT);
        x.xid[x.ext_in[i]][LOGICAL] = x.in_ids[i];
    }
    for (size_t i = 0; i < x.n_out; i++)
        x.out_ids[i] = NONE_ID;
    for (int i = 0; i < L->n_nodes && st == LY_OK; i++) {
        const ly_lower_node *gn = &L->nodes[i];
        if (!gn->portable && !gn->folded && gn->part == part) st = emit(&x, gn);
    }
    /* Outputs still channels-last leave through a transpose. */
    for (size_t i = 0; i < x.n_out && st == LY_OK; i++) {
        if (x.out_ids[i] != NONE_ID) continue;
        ly_graph_value v = x.ext_out[i];
        uint32_t src = x.xid[v][CHANNELS_LAST];
        uint32_t dims[LY_MAX_DIMS] = {0};
        int nd = ly_xb_dims(&L->shape[v], LOGICAL, dims);
        uint32_t id =
            ly_xb_value(&x, nd, dims, (uint32_t)(x.n_in + i), LY_XNN_FLAG_EXTERNAL_OUTPUT);
        ly_xb_transpose(&x, src, id, nd, nd == 3 ? ly_xb_swap3 : ly_xb_from_cl4);
        x.out_ids[i] = id;
        st = x.st;
    }
    if (st != LY_OK) goto done;

    ly_xnn_graph graph = {.version = "0",
                          .xnodes = x.n,
                          .n_xnodes = x.n_n,
                          .xvalues = x.v,
                          .n_xvalues = x.n_v,
                          .num_externs = (uint32_t)(x.n_in + x.n_out),
                          .input_ids = x.in_ids,
                          .n_input_ids = x.n_in,
                          .output_ids = x.out_ids,
                          .n_output_ids = x.n_out,
                          .constant_data = x.c,
                          .n_constant_data = x.n_c};
    uint8_t *blob = NULL;
    size_t blob_size = 0;
    st = ly_xnn_encode(&graph, NULL, 0, &blob, &blob_size);
    if (st != LY_OK) goto done;
    if (!LY_LOWER_GROW(L->blobs, L->n_blobs, L->cap_blobs) ||
        !LY_LOWER_GROW(L->delegates, L->n_delegates, L->cap_delegates)) {
        free(blob);
        st = ly_lower_oom();
        goto done;
    }
    L->blobs[L->n_blobs++] = (ly_pte_bytes){blob, blob_size};
    /* Segment index fixed up once the segment list is known. */
    L->delegates[L->n_delegates++] = (ly_pte_delegate){
        .id = LY_PTE_XNNPACK_BACKEND_ID, .location = LY_PTE_SEGMENT, .index = (uint32_t)L->n_blobs};

    ly_pte_instruction *ins = ly_lower_instruction(L);
    int32_t *args = ly_lower_calloc(&L->mem, x.n_in + x.n_out, sizeof *args);
    if (!ins || !args) {
        st = ly_lower_oom();
        goto done;
    }
    int at = (int)L->n_instr - 1;
    for (size_t i = 0; i < x.n_in; i++) {
        args[i] = L->pvalue[x.ext_in[i]];
        ly_lower_touch(L, args[i], at);
    }
    for (size_t i = 0; i < x.n_out; i++) {
        args[x.n_in + i] = L->pvalue[x.ext_out[i]];
        ly_lower_touch(L, args[x.n_in + i], at);
    }
    ins->type = LY_PTE_DELEGATE_CALL;
    ins->u.delegate_call.delegate_index = (int32_t)L->n_delegates - 1;
    ins->u.delegate_call.args = args;
    ins->u.delegate_call.n_args = x.n_in + x.n_out;
done:
    free(x.xid);
    free(x.ext_in);
    free(x.ext_out);
    free(x.in_ids);
    free(x.out_ids);
    free(x.v);
    free(x.n);
    free(x.c);
    return st;
}
