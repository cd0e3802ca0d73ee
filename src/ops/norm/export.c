/* SPDX-License-Identifier: MIT */
/* What the normalisations become in an ExecuTorch program (ops/op_export.h):
 * softmax and RMSNorm as XNNPACK nodes, layer norm as the portable
 * native_layer_norm. */
#include "ops/op_export.h"

#include <math.h>
#include <string.h>

/* over the last axis, as XNNPACK's softmax */
static bool takes_softmax(const ly_lowering *L, const ly_graph_node_info *n)
{
    const ly_tensor *a = ly_lower_shape(L, n->inputs[0]);
    const ly_axis_params *p = n->params;
    return a->ndim >= 1 && ly_lower_axis(p ? p->axis : -1, a->ndim) == a->ndim - 1;
}

static void emit_softmax(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    ly_xb_1x1(x, LY_XNN_SOFTMAX, in, ly_xb_define(x, n->outputs[0], LOGICAL));
}

LY_XNN_EXPORT(softmax, takes_softmax, emit_softmax);

/* RMSNorm as torch.export decomposes it, on XNNPACK nodes: x * rsqrt(mean(x²)
 * + eps) * scale, the mean and the eps one fully-connected node (a filter of
 * 1/C and a bias of eps, both packed). */
static void emit_rms_norm(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = ly_xb_shape(x, n->inputs[0]);
    const ly_norm_params *p = n->params;
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(s, LOGICAL, dims);
    uint32_t c = dims[nd - 1];
    float *mean = ly_xb_alloc(x, c + 1, sizeof(float));
    if (!mean) return;
    for (uint32_t i = 0; i < c; i++)
        mean[i] = 1.0f / (float)c;
    mean[c] = (float)(p ? p->eps : 1e-6);
    uint32_t sq = ly_xb_internal(x, nd, dims);
    ly_xb_1x1(x, LY_XNN_SQUARE, in, sq);
    uint32_t ms = ly_xb_fc_const(x, "mean", sq, nd, dims, 1, mean, &mean[c]);
    uint32_t rd[LY_MAX_DIMS];
    memcpy(rd, dims, sizeof rd);
    rd[nd - 1] = 1;
    uint32_t r = ly_xb_internal(x, nd, rd);
    ly_xb_1x1(x, LY_XNN_RECIPROCAL_SQUARE_ROOT, ms, r);
    bool scaled = n->n_inputs > 1 && n->inputs[1] != LY_GRAPH_NONE;
    uint32_t normed =
        scaled ? ly_xb_internal(x, nd, dims) : ly_xb_define(x, n->outputs[0], LOGICAL);
    ly_xb_2x1(x, LY_XNN_MULTIPLY, in, r, normed);
    if (scaled)
        ly_xb_2x1(x, LY_XNN_MULTIPLY, normed, ly_xb_get(x, n->inputs[1], LOGICAL),
                  ly_xb_define(x, n->outputs[0], LOGICAL));
}

LY_XNN_EXPORT(rms_norm, NULL, emit_rms_norm);

/* native_layer_norm.out(input, normalized_shape, weight?, bias?, eps, *, out0,
 * out1, out2): what layer_norm decomposes to in the edge dialect; out1 and
 * out2 (mean and 1/std, [..., 1]) are program tensors nothing else reads. */
static void call_layer_norm(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_tensor *x = ly_lower_shape(L, n->inputs[0]);
    const ly_norm_params *p = n->params;
    ly_tensor stats = *x;
    stats.shape[x->ndim - 1] = 1;
    ly_lower_call_begin(L, k, LY_PTE_NATIVE_LAYER_NORM);
    ly_pte_call_value(k, ly_lower_pvalue(L, n->inputs[0]));
    ly_pte_call_int_list(k, 1, &x->shape[x->ndim - 1]);
    ly_pte_call_value(k, ly_lower_program_value(L, n->n_inputs > 1 ? n->inputs[1] : LY_GRAPH_NONE));
    ly_pte_call_value(k, ly_lower_program_value(L, n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE));
    ly_pte_call_double(k, p ? p->eps : 1e-5);
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
    ly_pte_call_out(k, ly_lower_tensor_value(L, &stats));
    ly_pte_call_out(k, ly_lower_tensor_value(L, &stats));
}

LY_PORTABLE_EXPORT(layer_norm, ly_lower_takes_ranked, call_layer_norm);
