/* SPDX-License-Identifier: MIT */
/* What attention becomes in an ExecuTorch program (ops/op_export.h). */
#include "ops/op_export.h"

#include "libreyolo/sdpa.h"

#include <math.h>

/* no masks; q, k, v of one batch and head layout */
static bool takes_sdpa(const ly_lowering *L, const ly_graph_node_info *n)
{
    for (int i = 3; i < n->n_inputs; i++)
        if (n->inputs[i] != LY_GRAPH_NONE) return false;
    return ly_lower_shape(L, n->inputs[0])->ndim == 4;
}

/* [B, X, Y, C] -> [B, Y, X, C] into a new internal value. */
static uint32_t swap_middle(ly_xnn_builder *x, uint32_t in, uint32_t dims[4])
{
    static const uint32_t swap[4] = {0, 2, 1, 3};
    uint32_t t = dims[1];
    dims[1] = dims[2];
    dims[2] = t;
    uint32_t out = ly_xb_internal(x, 4, dims);
    ly_xb_transpose(x, in, out, 4, swap);
    return out;
}

/* sdpa as the manual expression (captures never take the fused path):
 * softmax((q * scale) · kᵀ) · v, the scale a fully-connected node with a
 * diagonal filter (exact: one product, zeros added), kᵀ a static transpose.
 * Tokens first (LY_SDPA_BNHD), q, k and v are transposed to heads first and
 * the result back. */
static void emit_sdpa(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_sdpa_params *p = n->params;
    bool tokens_first = p && p->layout == LY_SDPA_BNHD;
    const ly_tensor *qs = ly_xb_shape(x, n->inputs[0]), *ks = ly_xb_shape(x, n->inputs[1]),
                    *vs = ly_xb_shape(x, n->inputs[2]);
    uint32_t q = ly_xb_get(x, n->inputs[0], LOGICAL), k = ly_xb_get(x, n->inputs[1], LOGICAL),
             v = ly_xb_get(x, n->inputs[2], LOGICAL);
    uint32_t qd[4], kd[4], vd[4];
    ly_xb_dims(qs, LOGICAL, qd);
    ly_xb_dims(ks, LOGICAL, kd);
    ly_xb_dims(vs, LOGICAL, vd);
    if (tokens_first) {
        q = swap_middle(x, q, qd);
        k = swap_middle(x, k, kd);
        v = swap_middle(x, v, vd);
    }
    uint32_t d = qd[3];
    double scale = p && p->scale != 0.0 ? p->scale : 1.0 / sqrt((double)d);
    float *diag = ly_xb_alloc(x, (size_t)d * d, sizeof(float));
    if (!diag) return;
    for (uint32_t i = 0; i < d; i++)
        diag[i * d + i] = (float)scale;
    uint32_t qscaled = ly_xb_fc_const(x, "scale", q, 4, qd, d, diag, NULL);
    uint32_t kt_dims[4] = {kd[0], kd[1], kd[3], kd[2]}, swap_last[4] = {0, 1, 3, 2};
    uint32_t kt = ly_xb_internal(x, 4, kt_dims);
    ly_xb_transpose(x, k, kt, 4, swap_last);
    uint32_t sd[4] = {qd[0], qd[1], qd[2], kd[2]};
    uint32_t scores = ly_xb_internal(x, 4, sd), probs = ly_xb_internal(x, 4, sd);
    ly_xb_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, qscaled, kt, scores);
    ly_xb_1x1(x, LY_XNN_SOFTMAX, scores, probs);
    uint32_t out = ly_xb_define(x, n->outputs[0], LOGICAL);
    if (!tokens_first) {
        ly_xb_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, probs, v, out);
        return;
    }
    uint32_t od[4] = {qd[0], qd[1], qd[2], vd[3]}, swap[4] = {0, 2, 1, 3};
    uint32_t heads_first = ly_xb_internal(x, 4, od);
    ly_xb_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, probs, v, heads_first);
    ly_xb_transpose(x, heads_first, out, 4, swap);
}

LY_XNN_EXPORT(sdpa, takes_sdpa, emit_sdpa);
