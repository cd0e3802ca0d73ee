/* SPDX-License-Identifier: MIT */
/* What the matrix products become in an ExecuTorch program (ops/op_export.h):
 * XNNPACK's fully-connected and batch matrix multiply nodes. */
#include "ops/op_export.h"

#include <math.h>

static bool takes_linear(const ly_lowering *L, const ly_graph_node_info *n)
{
    const ly_linear_params *p = n->params;
    int64_t act = p ? p->activation : LY_ACT_NONE;
    ly_graph_value bias = n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE;
    return ly_lower_known_f32(L, n->inputs[1]) &&
           (bias == LY_GRAPH_NONE || ly_lower_known_f32(L, bias)) &&
           (act == LY_ACT_NONE || act == LY_ACT_RELU || act == LY_ACT_GELU);
}

/* act(x·Wᵀ + b) + residual over the last logical axis: a fully-connected
 * node, whose filter ([N, K], PyTorch's layout) and bias XNNPACK packs (relu
 * as its output range), then a GELU node and an add node for what our
 * runtime fuses into the GEMM (xnn_takes admits no other activation). */
static void emit_linear(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_linear_params *p = n->params;
    int64_t act = p ? p->activation : LY_ACT_NONE;
    ly_graph_value residual = n->n_inputs > 3 ? n->inputs[3] : LY_GRAPH_NONE;
    ly_graph_value wv = n->inputs[1], bv = n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE;
    const ly_tensor *w = ly_xb_shape(x, wv);
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    uint32_t wd[2] = {(uint32_t)w->shape[0], (uint32_t)w->shape[1]};
    size_t bytes = (size_t)ly_lower_numel(w) * sizeof(float);
    uint32_t filter =
        ly_xb_const(x, ly_xb_const_name(x, n->name, "weight"), 2, wd, ly_xb_known(x, wv), bytes);
    uint32_t bias = NONE_ID;
    if (bv != LY_GRAPH_NONE)
        bias = ly_xb_const(x, ly_xb_const_name(x, n->name, "bias"), 1, wd, ly_xb_known(x, bv),
                           (size_t)wd[0] * sizeof(float));
    bool gelu = act == LY_ACT_GELU, has_residual = residual != LY_GRAPH_NONE;
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(ly_xb_shape(x, n->outputs[0]), LOGICAL, dims);
    uint32_t out = gelu || has_residual ? ly_xb_internal(x, nd, dims)
                                        : ly_xb_define(x, n->outputs[0], LOGICAL);
    ly_xnn_node *fc = ly_xb_node(x, LY_XNN_FULLY_CONNECTED);
    if (!fc) return;
    fc->u.fc = (__typeof__(fc->u.fc)){in, filter, bias, out, 0};
    if (act == LY_ACT_RELU) {
        fc->has_output_min_max = true;
        fc->output_min = 0.0f;
        fc->output_max = INFINITY;
    }
    if (gelu) {
        uint32_t done =
            has_residual ? ly_xb_internal(x, nd, dims) : ly_xb_define(x, n->outputs[0], LOGICAL);
        ly_xb_1x1(x, LY_XNN_GELU, out, done);
        out = done;
    }
    if (has_residual) {
        uint32_t r = ly_xb_get(x, residual, LOGICAL);
        ly_xb_2x1(x, LY_XNN_ADD, out, r, ly_xb_define(x, n->outputs[0], LOGICAL));
    }
}

LY_XNN_EXPORT(linear, takes_linear, emit_linear);

/* XNNPACK's batch matrix multiply does not broadcast batch axes */
static bool takes_matmul(const ly_lowering *L, const ly_graph_node_info *n)
{
    const ly_tensor *a = ly_lower_shape(L, n->inputs[0]), *b = ly_lower_shape(L, n->inputs[1]);
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim - 2; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* a·b (a·bᵀ: b's last two axes transposed first, as torch.export writes
 * q @ k.transpose(-2, -1)): a batch matrix multiply on the logical order. */
static void emit_matmul(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_matmul_params *p = n->params;
    uint32_t a = ly_xb_get(x, n->inputs[0], LOGICAL), b = ly_xb_get(x, n->inputs[1], LOGICAL);
    if (p && p->transpose_b) {
        uint32_t dims[LY_MAX_DIMS] = {0}, perm[LY_MAX_DIMS];
        int nd = ly_xb_dims(ly_xb_shape(x, n->inputs[1]), LOGICAL, dims);
        for (int i = 0; i < nd; i++)
            perm[i] = (uint32_t)i;
        perm[nd - 2] = (uint32_t)nd - 1;
        perm[nd - 1] = (uint32_t)nd - 2;
        uint32_t t = dims[nd - 1];
        dims[nd - 1] = dims[nd - 2];
        dims[nd - 2] = t;
        uint32_t bt = ly_xb_internal(x, nd, dims);
        ly_xb_transpose(x, b, bt, nd, perm);
        b = bt;
    }
    ly_xb_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, a, b, ly_xb_define(x, n->outputs[0], LOGICAL));
}

LY_XNN_EXPORT(matmul, takes_matmul, emit_matmul);
