/* SPDX-License-Identifier: MIT */
/*
 * Identities of the ops that save whole passes over memory where a graph was
 * built from a lowered form (an ExecuTorch program read back, graph.h):
 *
 *  - attention whose q, k and v are each transposed heads first ([0, 2, 1, 3])
 *    and whose result is transposed back is attention in the tokens-first
 *    layout (LY_SDPA_BNHD: the same numbers, libreyolo/sdpa.h) on the
 *    operands as they are. The exporter writes tokens-first attention that
 *    way, since XNNPACK has no such layout: RF-DETR-n's program ran 56
 *    transposes a run that its checkpoint does not.
 *  - q scaled after its transpose by one value (a model's manual attention,
 *    ViT's: the Multiply stays where the program passes the value in) is
 *    the same scaling before it, or the attention's own: ViT-Ti's program
 *    ran 48 transposes and 12 Multiplies a run (on the reference, 7% of its
 *    time at 2 threads) that its checkpoint does not.
 */
#include "graph/graph.h"

#include "core/core.h"
#include "libreyolo/sdpa.h"

#include <stdio.h>

static const int64_t SWAP_MIDDLE[4] = {0, 2, 1, 3};

/* The value `v` is the heads-first transpose of: that value, else NONE. */
static ly_graph_value transposed_from(const ly_graph *g, ly_graph_value v)
{
    ly_graph_value_info info;
    ly_graph_node_info n;
    if (v == LY_GRAPH_NONE || ly_graph_value_at(g, v, &info) != LY_OK ||
        info.kind != LY_GRAPH_VALUE_NODE || ly_graph_node_at(g, info.producer, &n) != LY_OK ||
        n.op != LY_OP_PERMUTE)
        return LY_GRAPH_NONE;
    const ly_permute_params *p = n.params;
    if (p->ndim != 4) return LY_GRAPH_NONE;
    for (int i = 0; i < 4; i++)
        if (p->perm[i] != SWAP_MIDDLE[i]) return LY_GRAPH_NONE;
    return n.inputs[0];
}

/* How many times `v` is read: by nodes, and as a graph output. */
static int readers(const ly_graph *g, ly_graph_value v)
{
    ly_graph_value_info info;
    int n = ly_graph_value_at(g, v, &info) == LY_OK && info.output_index >= 0;
    int n_nodes = ly_graph_node_count(g);
    for (int i = 0; i < n_nodes; i++) {
        ly_graph_node_info node;
        if (ly_graph_node_at(g, i, &node) != LY_OK) continue;
        for (int k = 0; k < node.n_inputs; k++)
            n += node.inputs[k] == v;
    }
    return n;
}

/* A constant of one element (any rank): it scales every element alike, in
 * any layout. */
static bool one_constant_value(const ly_graph *g, ly_graph_value v)
{
    ly_graph_value_info info;
    if (ly_graph_value_at(g, v, &info) != LY_OK || info.kind != LY_GRAPH_VALUE_CONSTANT)
        return false;
    for (int d = 0; d < info.ndim; d++)
        if (info.shape[d] != 1) return false;
    return true;
}

/* `q`, read by the attention alone, is the heads-first transpose of x times
 * one constant value c: returns the tokens-first q, else NONE and the graph
 * as it was. Where the attention scales by 1 (*scale), it scales by c
 * instead and x itself is q: the attention's q * scale is that Multiply's
 * product, bit for bit, and the Multiply goes. Otherwise the Multiply takes
 * x (its node keeps its place and output id; the output becomes tokens
 * first). */
static ly_graph_value scale_before_transpose(ly_graph *g, ly_graph_value q, double *scale,
                                             ly_status *st)
{
    ly_graph_value_info info;
    ly_graph_node_info mul;
    if (q == LY_GRAPH_NONE || ly_graph_value_at(g, q, &info) != LY_OK ||
        info.kind != LY_GRAPH_VALUE_NODE || ly_graph_node_at(g, info.producer, &mul) != LY_OK ||
        mul.op != LY_OP_MUL || mul.n_inputs != 2 || readers(g, q) != 1)
        return LY_GRAPH_NONE;
    for (int side = 0; side < 2; side++) {
        ly_graph_value x = transposed_from(g, mul.inputs[side]);
        if (x == LY_GRAPH_NONE || !one_constant_value(g, mul.inputs[1 - side])) continue;
        const ly_tensor *c;
        if (*scale == 1.0 && ly_graph_constant_read(g, mul.inputs[1 - side], &c) == LY_OK &&
            c->dtype == LY_F32) {
            *scale = *(const float *)c->data;
            return x;
        }
        ly_graph_value in[2] = {mul.inputs[0], mul.inputs[1]};
        in[side] = x;
        *st = ly_graph_node_replace(g, info.producer, LY_OP_MUL, mul.name, 2, in, mul.params);
        return *st == LY_OK ? q : LY_GRAPH_NONE;
    }
    return LY_GRAPH_NONE;
}

ly_status ly_graph_fold_sdpa_transposes(ly_graph *g, int *folded)
{
    *folded = 0;
    int n_nodes = ly_graph_node_count(g);
    for (int i = 0; i < n_nodes; i++) {
        ly_graph_node_info back, attn;
        ly_graph_value_info info;
        if (ly_graph_node_at(g, i, &back) != LY_OK) continue;
        ly_graph_value heads = transposed_from(g, back.outputs[0]);
        if (heads == LY_GRAPH_NONE || ly_graph_value_at(g, heads, &info) != LY_OK ||
            info.kind != LY_GRAPH_VALUE_NODE ||
            ly_graph_node_at(g, info.producer, &attn) != LY_OK || attn.op != LY_OP_SDPA ||
            ((const ly_sdpa_params *)attn.params)->layout != LY_SDPA_BHND || attn.n_inputs < 3)
            continue;
        ly_graph_value in[LY_KERNEL_MAX_INPUTS];
        bool all = true;
        for (int k = 0; k < attn.n_inputs; k++) {
            in[k] = k < 3 ? transposed_from(g, attn.inputs[k]) : attn.inputs[k];
            all &= in[k] != LY_GRAPH_NONE || k >= 3;
        }
        ly_sdpa_params tokens_first = *(const ly_sdpa_params *)attn.params;
        tokens_first.layout = LY_SDPA_BNHD;
        /* k and v first: the scaling moves only where the rest folds too */
        if (!all && in[0] == LY_GRAPH_NONE && in[1] != LY_GRAPH_NONE && in[2] != LY_GRAPH_NONE) {
            ly_status st = LY_OK;
            in[0] = scale_before_transpose(g, attn.inputs[0], &tokens_first.scale, &st);
            if (st != LY_OK) return st;
            all = in[0] != LY_GRAPH_NONE;
        }
        if (!all) continue;
        char name[160];
        snprintf(name, sizeof name, "%s.tokens_first", attn.name);
        /* The transpose back becomes the attention: its readers get the
         * same [B, N, H, D] values; what only the heads-first form read is
         * left for ly_graph_prune. */
        ly_status st =
            ly_graph_node_replace(g, i, LY_OP_SDPA, name, attn.n_inputs, in, &tokens_first);
        if (st != LY_OK) return st;
        ++*folded;
    }
    return LY_OK;
}
