/* SPDX-License-Identifier: MIT */
/* What the ops that move elements become in an ExecuTorch program
 * (ops/op_export.h): XNNPACK's static reshape, transpose, slice and
 * concatenation, or no node where a move only undoes a layout; a reshape of
 * indices is a portable view_copy. */
#include "ops/op_export.h"
#include "ops/shape/shape.h"

static void emit_concat(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = ly_xb_shape(x, n->outputs[0]);
    int64_t axis = ly_lower_axis(((const ly_concat_params *)n->params)->axis, s->ndim);
    int layout = LOGICAL;
    for (int i = 0; i < n->n_inputs; i++)
        if (ly_xb_have(x, n->inputs[i]) == CHANNELS_LAST) layout = CHANNELS_LAST;
    if (!ly_xb_cl_rank(s->ndim)) layout = LOGICAL;
    uint32_t in[LY_KERNEL_MAX_INPUTS], widths[LY_KERNEL_MAX_INPUTS];
    for (int i = 0; i < n->n_inputs; i++) {
        in[i] = ly_xb_get(x, n->inputs[i], layout);
        widths[i] = (uint32_t)ly_xb_shape(x, n->inputs[i])->shape[axis];
    }
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(s, layout, dims);
    uint32_t out = ly_xb_define(x, n->outputs[0], layout);
    if (n->n_inputs == 1) {
        ly_xb_1x1(x, LY_XNN_COPY, in[0], out);
        return;
    }
    ly_xb_concat(x, n->n_inputs, in, out, nd, dims, ly_xb_axis(nd, layout, axis), widths);
}

LY_XNN_EXPORT(concat, NULL, emit_concat);

/* XNNPACK's static slice takes unit steps */
static bool takes_slice(const ly_lowering *L, const ly_graph_node_info *n)
{
    (void)L;
    return ((const ly_slice_params *)n->params)->step == 1;
}

static void emit_slice(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_slice_params *p = n->params;
    const ly_tensor *s = ly_xb_shape(x, n->outputs[0]), *src = ly_xb_shape(x, n->inputs[0]);
    int64_t axis = ly_lower_axis(p->axis, src->ndim), start, count;
    ly_slice_resolve(p, src->shape[axis], &start, &count);
    int layout = ly_xb_cl_rank(s->ndim) ? ly_xb_have(x, n->inputs[0]) : LOGICAL;
    uint32_t in = ly_xb_get(x, n->inputs[0], layout);
    uint32_t dims[LY_MAX_DIMS], offsets[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(s, layout, dims);
    offsets[ly_xb_axis(nd, layout, axis)] = (uint32_t)start;
    ly_xb_slice(x, in, ly_xb_define(x, n->outputs[0], layout), nd, offsets, dims);
}

LY_XNN_EXPORT(slice, takes_slice, emit_slice);

/* A reshape is on the logical order, except [N, C, H, W] -> [N, C, H*W] of a
 * channels-last value: [N, H, W, C] -> [N, H*W, C] is the same move. */
static void emit_reshape(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_tensor *in_shape = ly_xb_shape(x, n->inputs[0]), *out = ly_xb_shape(x, n->outputs[0]);
    uint32_t dims[LY_MAX_DIMS] = {0};
    bool flattens_space = in_shape->ndim == 4 && out->ndim == 3 &&
                          out->shape[0] == in_shape->shape[0] &&
                          out->shape[1] == in_shape->shape[1];
    if (flattens_space && ly_xb_have(x, n->inputs[0]) == CHANNELS_LAST) {
        uint32_t in = ly_xb_get(x, n->inputs[0], CHANNELS_LAST);
        int nd = ly_xb_dims(out, CHANNELS_LAST, dims);
        ly_xb_reshape(x, in, ly_xb_define(x, n->outputs[0], CHANNELS_LAST), nd, dims);
        return;
    }
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    int nd = ly_xb_dims(out, LOGICAL, dims);
    ly_xb_reshape(x, in, ly_xb_define(x, n->outputs[0], LOGICAL), nd, dims);
}

LY_XNN_EXPORT(reshape, NULL, emit_reshape);

/* A permute that undoes the channels-last move of its input ([N, C, W] ->
 * [N, W, C] of a value held as [N, W, C]) is that value: no node. */
static bool permute_is_layout(const ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_permute_params *p = n->params;
    const ly_tensor *s = ly_xb_shape(x, n->inputs[0]);
    if (ly_xb_held(x, n->inputs[0], CHANNELS_LAST) == NONE_ID || p->ndim != s->ndim) return false;
    const uint32_t *want = s->ndim == 3 ? ly_xb_swap3 : s->ndim == 4 ? ly_xb_to_cl4 : NULL;
    if (!want) return false;
    for (int i = 0; i < s->ndim; i++)
        if ((uint32_t)p->perm[i] != want[i]) return false;
    return true;
}

static void emit_permute(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_permute_params *p = n->params;
    if (permute_is_layout(x, n)) {
        uint32_t in = ly_xb_held(x, n->inputs[0], CHANNELS_LAST);
        if (ly_xb_ext_out_index(x, n->outputs[0]) >= 0)
            ly_xb_1x1(x, LY_XNN_COPY, in, ly_xb_define(x, n->outputs[0], LOGICAL));
        else
            ly_xb_alias(x, n->outputs[0], LOGICAL, in);
        return;
    }
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    uint32_t perm[LY_MAX_DIMS];
    for (int i = 0; i < p->ndim; i++)
        perm[i] = (uint32_t)p->perm[i];
    ly_xb_transpose(x, in, ly_xb_define(x, n->outputs[0], LOGICAL), (int)p->ndim, perm);
}

LY_XNN_EXPORT(permute, NULL, emit_permute);

/* A reshape of indices runs between portable kernels; of floats, in XNNPACK. */
static bool takes_indices(const ly_lowering *L, const ly_graph_node_info *n)
{
    return ly_lower_shape(L, n->inputs[0])->dtype != LY_F32;
}

/* view_copy.out(self, size, *, out) */
static void call_view_copy(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_tensor *o = ly_lower_shape(L, n->outputs[0]);
    ly_lower_call_begin(L, k, LY_PTE_VIEW_COPY);
    ly_pte_call_value(k, ly_lower_program_value(L, n->inputs[0]));
    ly_pte_call_int_list(k, o->ndim, o->shape);
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
}

LY_PORTABLE_EXPORT(reshape, takes_indices, call_view_copy);
