/* SPDX-License-Identifier: MIT */
/* What the element-wise ops become in an ExecuTorch program (ops/op_export.h):
 * XNNPACK nodes, on whichever layout their operands already have; exp, sin
 * and cos, which the XNNPACK delegate has no node for, portable calls. */
#include "ops/op_export.h"

#include <math.h>

/* Broadcasting follows the logical shapes: channels-last only when both
 * operands have the output's rank (so their axes move alike) or one is a
 * single element. */
static void emit_binary(ly_xnn_builder *x, const ly_graph_node_info *n, ly_xnn_node_type type)
{
    ly_graph_value a = n->inputs[0], b = n->inputs[1];
    const ly_tensor *sa = ly_xb_shape(x, a), *sb = ly_xb_shape(x, b);
    int nd = ly_xb_shape(x, n->outputs[0])->ndim;
    int layout = LOGICAL;
    if (sa->ndim == nd && sb->ndim == nd)
        layout = ly_xb_have(x, a) == CHANNELS_LAST || ly_xb_have(x, b) == CHANNELS_LAST
                     ? CHANNELS_LAST
                     : LOGICAL;
    else if (ly_lower_numel(sb) == 1 && sa->ndim == nd)
        layout = ly_xb_have(x, a);
    else if (ly_lower_numel(sa) == 1 && sb->ndim == nd)
        layout = ly_xb_have(x, b);
    uint32_t ia = ly_xb_get(x, a, sa->ndim == nd ? layout : LOGICAL);
    uint32_t ib = ly_xb_get(x, b, sb->ndim == nd ? layout : LOGICAL);
    ly_xb_2x1(x, type, ia, ib, ly_xb_define(x, n->outputs[0], layout));
}

static void emit_add(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    emit_binary(x, n, LY_XNN_ADD);
}

LY_XNN_EXPORT(add, NULL, emit_add);

static void emit_sub(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    emit_binary(x, n, LY_XNN_SUBTRACT);
}

LY_XNN_EXPORT(sub, NULL, emit_sub);

static void emit_mul(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    emit_binary(x, n, LY_XNN_MULTIPLY);
}

LY_XNN_EXPORT(mul, NULL, emit_mul);

static void emit_div(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    emit_binary(x, n, LY_XNN_DIV);
}

LY_XNN_EXPORT(div, NULL, emit_div);

/* clamp and relu: XNNPACK's clamp node (its bounds are the node's output range). */
static void emit_clamp_range(ly_xnn_builder *x, const ly_graph_node_info *n, float lo, float hi)
{
    int layout = ly_xb_have(x, n->inputs[0]);
    uint32_t in = ly_xb_get(x, n->inputs[0], layout);
    uint32_t out = ly_xb_define(x, n->outputs[0], layout);
    ly_xnn_node *node = ly_xb_node(x, LY_XNN_CLAMP);
    if (!node) return;
    node->u.n1x1 = (__typeof__(node->u.n1x1)){in, out, 0};
    node->has_output_min_max = true;
    node->output_min = lo;
    node->output_max = hi;
}

static void emit_clamp(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_clamp_params *p = n->params;
    emit_clamp_range(x, n, p ? (float)p->min : -INFINITY, p ? (float)p->max : INFINITY);
}

LY_XNN_EXPORT(clamp, NULL, emit_clamp);

static void emit_relu(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    emit_clamp_range(x, n, 0.0f, INFINITY);
}

LY_XNN_EXPORT(relu, NULL, emit_relu);

static void emit_log(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    ly_xb_unary(x, n, LY_XNN_LOG);
}

LY_XNN_EXPORT(log, NULL, emit_log);

static void emit_gelu(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    ly_xb_unary(x, n, LY_XNN_GELU);
}

LY_XNN_EXPORT(gelu, NULL, emit_gelu);

/* <op>.out(self, *, out) */
static void call_unary(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k,
                       ly_pte_portable_op op)
{
    ly_lower_call_begin(L, k, op);
    ly_pte_call_value(k, ly_lower_pvalue(L, n->inputs[0]));
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
}

static void call_exp(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    call_unary(L, n, k, LY_PTE_EXP);
}

LY_PORTABLE_EXPORT(exp, ly_lower_takes_ranked, call_exp);

static void call_sin(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    call_unary(L, n, k, LY_PTE_SIN);
}

LY_PORTABLE_EXPORT(sin, ly_lower_takes_ranked, call_sin);

static void call_cos(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    call_unary(L, n, k, LY_PTE_COS);
}

LY_PORTABLE_EXPORT(cos, ly_lower_takes_ranked, call_cos);
