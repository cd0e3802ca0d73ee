/* SPDX-License-Identifier: MIT */
/*
 * What each op the manifest marks XNN (or EITHER) becomes inside a partition:
 * its ly_xnn_export_<name> (lowering.h), the operands it covers and its
 * XNNPACK nodes, built with the partition's builder (partition.c).
 */
#include "export/lowering.h"

#include "ops/shape/shape.h"

#include <math.h>

static bool takes_conv(const ly_lowering *L, const ly_graph_node_info *n)
{
    const ly_conv2d_params *p = n->params;
    ly_graph_value bias = n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE;
    return ly_lower_is_4d(L, n->inputs[0]) && ly_lower_known_f32(L, n->inputs[1]) &&
           (bias == LY_GRAPH_NONE || ly_lower_known_f32(L, bias)) &&
           p->activation <= LY_ACT_LEAKY_RELU;
}

/* y = act(conv(x) + b) (* s + t) (+ residual): Conv2d / DepthwiseConv2d, then
 * the activation as XNNPACK nodes (SiLU = x * sigmoid(x)), the post-affine,
 * then the add. */
static void emit_conv(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_conv2d_params *p = n->params;
    ly_graph_value wv = n->inputs[1], bv = n->n_inputs > 2 ? n->inputs[2] : LY_GRAPH_NONE;
    ly_graph_value residual = n->n_inputs > 3 ? n->inputs[3] : LY_GRAPH_NONE;
    const ly_tensor *w = &x->L->shape[wv];
    const ly_tensor *out_shape = &x->L->shape[n->outputs[0]];
    int64_t O = w->shape[0], Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3];
    int64_t G = p->groups > 0 ? p->groups : 1;
    bool depthwise = Cg == 1;
    uint32_t in = ly_xb_get(x, n->inputs[0], CHANNELS_LAST);
    float *filter = ly_lower_calloc(&x->L->mem, (size_t)(O * Cg * KH * KW), sizeof(float));
    if (!filter) {
        x->st = ly_lower_oom();
        return;
    }
    const float *src = x->L->known[wv];
    uint32_t fdims[4];
    if (depthwise) {
        /* [O, 1, KH, KW] -> [1, KH, KW, O] */
        for (int64_t o = 0; o < O; o++)
            for (int64_t t = 0; t < KH * KW; t++)
                filter[t * O + o] = src[o * KH * KW + t];
        fdims[0] = 1, fdims[1] = (uint32_t)KH, fdims[2] = (uint32_t)KW, fdims[3] = (uint32_t)O;
    } else {
        /* OIHW -> OHWI */
        for (int64_t o = 0; o < O; o++)
            for (int64_t c = 0; c < Cg; c++)
                for (int64_t t = 0; t < KH * KW; t++)
                    filter[(o * KH * KW + t) * Cg + c] = src[(o * Cg + c) * KH * KW + t];
        fdims[0] = (uint32_t)O, fdims[1] = (uint32_t)KH, fdims[2] = (uint32_t)KW,
        fdims[3] = (uint32_t)Cg;
    }
    uint32_t filter_id = ly_xb_const(x, ly_xb_const_name(x, n->name, "weight"), 4, fdims, filter,
                                     (size_t)(O * Cg * KH * KW) * sizeof(float));
    uint32_t bias_id = NONE_ID;
    if (bv != LY_GRAPH_NONE) {
        uint32_t bd = (uint32_t)O;
        bias_id = ly_xb_const(x, ly_xb_const_name(x, n->name, "bias"), 1, &bd, x->L->known[bv],
                              (size_t)O * sizeof(float));
    }
    int64_t act = p->activation;
    bool tail = act == LY_ACT_SILU || act == LY_ACT_SIGMOID || act == LY_ACT_LEAKY_RELU ||
                residual != LY_GRAPH_NONE || p->post_affine;
    uint32_t dims[4] = {0};
    ly_xb_dims(out_shape, CHANNELS_LAST, dims);
    uint32_t conv_out =
        tail ? ly_xb_internal(x, 4, dims) : ly_xb_define(x, n->outputs[0], CHANNELS_LAST);
    ly_xnn_node *node = ly_xb_node(x, depthwise ? LY_XNN_DEPTHWISE_CONV2D : LY_XNN_CONV2D);
    if (!node) return;
    node->u.conv = (__typeof__(node->u.conv)){.padding_top = (uint32_t)p->padding[0],
                                              .padding_right = (uint32_t)p->padding[1],
                                              .padding_bottom = (uint32_t)p->padding[0],
                                              .padding_left = (uint32_t)p->padding[1],
                                              .kernel_height = (uint32_t)KH,
                                              .kernel_width = (uint32_t)KW,
                                              .subsampling_height = (uint32_t)p->stride[0],
                                              .subsampling_width = (uint32_t)p->stride[1],
                                              .dilation_height = (uint32_t)p->dilation[0],
                                              .dilation_width = (uint32_t)p->dilation[1],
                                              .group_input_channels = (uint32_t)Cg,
                                              .group_output_channels = (uint32_t)(O / G),
                                              .groups = (uint32_t)G,
                                              .input1_id = in,
                                              .filter_id = filter_id,
                                              .bias_id = bias_id,
                                              .output_id = conv_out};
    if (act == LY_ACT_RELU) {
        node->has_output_min_max = true;
        node->output_min = 0.0f;
        node->output_max = INFINITY;
    }
    if (!tail) return;
    bool has_residual = residual != LY_GRAPH_NONE;
    uint32_t y = conv_out;
    if (act == LY_ACT_SILU || act == LY_ACT_SIGMOID || act == LY_ACT_LEAKY_RELU) {
        uint32_t done = has_residual ? ly_xb_internal(x, 4, dims)
                                     : ly_xb_define(x, n->outputs[0], CHANNELS_LAST);
        if (act == LY_ACT_SILU) {
            uint32_t s = ly_xb_internal(x, 4, dims);
            ly_xb_1x1(x, LY_XNN_SIGMOID, y, s);
            ly_xb_2x1(x, LY_XNN_MULTIPLY, y, s, done);
        } else if (act == LY_ACT_SIGMOID) {
            ly_xb_1x1(x, LY_XNN_SIGMOID, y, done);
        } else {
            ly_xnn_node *l = ly_xb_node(x, LY_XNN_LEAKY_RELU);
            if (l) l->u.leaky_relu = (__typeof__(l->u.leaky_relu)){(float)p->alpha, y, done, 0};
        }
        y = done;
    }
    if (p->post_affine) {
        /* A 1x1 depthwise convolution with every filter tap the scale and
         * every bias the shift: constants inside partitions stay packed
         * filters and biases. */
        float *k = ly_lower_calloc(&x->L->mem, (size_t)(2 * O), sizeof(float));
        if (!k) {
            x->st = ly_lower_oom();
            return;
        }
        for (int64_t o = 0; o < O; o++) {
            k[o] = (float)p->post_scale;
            k[O + o] = (float)p->post_shift;
        }
        uint32_t adims[4] = {1, 1, 1, (uint32_t)O}, bd = (uint32_t)O;
        uint32_t scale_id = ly_xb_const(x, ly_xb_const_name(x, n->name, "post_scale"), 4, adims, k,
                                        (size_t)O * sizeof(float));
        uint32_t shift_id = ly_xb_const(x, ly_xb_const_name(x, n->name, "post_shift"), 1, &bd,
                                        k + O, (size_t)O * sizeof(float));
        uint32_t done = has_residual ? ly_xb_internal(x, 4, dims)
                                     : ly_xb_define(x, n->outputs[0], CHANNELS_LAST);
        ly_xnn_node *affine = ly_xb_node(x, LY_XNN_DEPTHWISE_CONV2D);
        if (!affine) return;
        affine->u.conv = (__typeof__(affine->u.conv)){.kernel_height = 1,
                                                      .kernel_width = 1,
                                                      .subsampling_height = 1,
                                                      .subsampling_width = 1,
                                                      .dilation_height = 1,
                                                      .dilation_width = 1,
                                                      .group_input_channels = 1,
                                                      .group_output_channels = 1,
                                                      .groups = (uint32_t)O,
                                                      .input1_id = y,
                                                      .filter_id = scale_id,
                                                      .bias_id = shift_id,
                                                      .output_id = done};
        y = done;
    }
    if (has_residual) {
        uint32_t r = ly_xb_get(x, residual, CHANNELS_LAST);
        ly_xb_2x1(x, LY_XNN_ADD, y, r, ly_xb_define(x, n->outputs[0], CHANNELS_LAST));
    }
}

LY_XNN_EXPORT(conv2d, takes_conv, emit_conv);

/* pools and resizing: on channels-last NHWC */
static bool takes_4d(const ly_lowering *L, const ly_graph_node_info *n)
{
    return ly_lower_is_4d(L, n->inputs[0]);
}

static void emit_pool(ly_xnn_builder *x, const ly_graph_node_info *n, ly_xnn_node_type type)
{
    const ly_pool2d_params *p = n->params;
    uint32_t in = ly_xb_get(x, n->inputs[0], CHANNELS_LAST);
    uint32_t out = ly_xb_define(x, n->outputs[0], CHANNELS_LAST);
    ly_xnn_node *node = ly_xb_node(x, type);
    if (!node) return;
    node->u.pooling = (__typeof__(node->u.pooling)){.padding_top = (uint32_t)p->padding[0],
                                                    .padding_right = (uint32_t)p->padding[1],
                                                    .padding_bottom = (uint32_t)p->padding[0],
                                                    .padding_left = (uint32_t)p->padding[1],
                                                    .pooling_height = (uint32_t)p->kernel[0],
                                                    .pooling_width = (uint32_t)p->kernel[1],
                                                    .stride_height = (uint32_t)p->stride[0],
                                                    .stride_width = (uint32_t)p->stride[1],
                                                    .dilation_height = 1,
                                                    .dilation_width = 1,
                                                    .input_id = in,
                                                    .output_id = out};
}

static void emit_max_pool(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    emit_pool(x, n, LY_XNN_MAX_POOLING_2D);
}

LY_XNN_EXPORT(max_pool2d, takes_4d, emit_max_pool);

static void emit_avg_pool(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    emit_pool(x, n, LY_XNN_AVG_POOLING_2D);
}

LY_XNN_EXPORT(avg_pool2d, takes_4d, emit_avg_pool);

static void emit_sigmoid(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    int layout = ly_xb_have(x, n->inputs[0]);
    uint32_t in = ly_xb_get(x, n->inputs[0], layout);
    ly_xb_1x1(x, LY_XNN_SIGMOID, in, ly_xb_define(x, n->outputs[0], layout));
}

LY_XNN_EXPORT(sigmoid, NULL, emit_sigmoid);

static void emit_silu(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    int layout = ly_xb_have(x, n->inputs[0]);
    uint32_t in = ly_xb_get(x, n->inputs[0], layout);
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(&x->L->shape[n->outputs[0]], layout, dims);
    uint32_t s = ly_xb_internal(x, nd, dims);
    ly_xb_1x1(x, LY_XNN_SIGMOID, in, s);
    ly_xb_2x1(x, LY_XNN_MULTIPLY, in, s, ly_xb_define(x, n->outputs[0], layout));
}

LY_XNN_EXPORT(silu, NULL, emit_silu);

/* Broadcasting follows the logical shapes: channels-last only when both
 * operands have the output's rank (so their axes move alike) or one is a
 * single element. */
static void emit_binary(ly_xnn_builder *x, const ly_graph_node_info *n, ly_xnn_node_type type)
{
    ly_graph_value a = n->inputs[0], b = n->inputs[1];
    const ly_tensor *sa = &x->L->shape[a], *sb = &x->L->shape[b];
    int nd = x->L->shape[n->outputs[0]].ndim;
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

static void emit_concat(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = &x->L->shape[n->outputs[0]];
    int64_t axis = ly_lower_axis(((const ly_concat_params *)n->params)->axis, s->ndim);
    int layout = LOGICAL;
    for (int i = 0; i < n->n_inputs; i++)
        if (ly_xb_have(x, n->inputs[i]) == CHANNELS_LAST) layout = CHANNELS_LAST;
    if (!ly_xb_cl_rank(s->ndim)) layout = LOGICAL;
    uint32_t in[LY_KERNEL_MAX_INPUTS], widths[LY_KERNEL_MAX_INPUTS];
    for (int i = 0; i < n->n_inputs; i++) {
        in[i] = ly_xb_get(x, n->inputs[i], layout);
        widths[i] = (uint32_t)x->L->shape[n->inputs[i]].shape[axis];
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
    const ly_tensor *s = &x->L->shape[n->outputs[0]], *src = &x->L->shape[n->inputs[0]];
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

/* [1, 4R, A] -> [1, 4, A]: channels-last [1, A, 4R] viewed as [1, 4A, R],
 * softmax over R, projected on 0..R-1 (a fully-connected layer), [1, A, 4]. */
static uint32_t dfl_projection(ly_xnn_builder *x, int64_t R)
{
    if (x->proj_id != NONE_ID && x->v[x->proj_id].tensor.dims[1] == (uint32_t)R) return x->proj_id;
    float *proj = ly_lower_calloc(&x->L->mem, (size_t)R, sizeof(float));
    if (!proj) {
        x->st = ly_lower_oom();
        return NONE_ID;
    }
    for (int64_t i = 0; i < R; i++)
        proj[i] = (float)i;
    uint32_t dims[2] = {1, (uint32_t)R};
    x->proj_id = ly_xb_const(x, "dfl_project", 2, dims, proj, (size_t)R * sizeof(float));
    return x->proj_id;
}

static bool takes_dfl(const ly_lowering *L, const ly_graph_node_info *n)
{
    return L->shape[n->inputs[0]].ndim == 3;
}

static void emit_dfl(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = &x->L->shape[n->inputs[0]];
    int64_t A = s->shape[2], R = s->shape[1] / 4;
    uint32_t box_cl = ly_xb_get(x, n->inputs[0], CHANNELS_LAST);
    uint32_t d3[3] = {1, (uint32_t)(A * 4), (uint32_t)R};
    uint32_t r = ly_xb_internal(x, 3, d3);
    ly_xb_reshape(x, box_cl, r, 3, d3);
    uint32_t p = ly_xb_internal(x, 3, d3);
    ly_xb_1x1(x, LY_XNN_SOFTMAX, r, p);
    uint32_t e3[3] = {1, (uint32_t)(A * 4), 1};
    uint32_t e = ly_xb_internal(x, 3, e3);
    ly_xnn_node *fc = ly_xb_node(x, LY_XNN_FULLY_CONNECTED);
    uint32_t proj = dfl_projection(x, R);
    if (fc) fc->u.fc = (__typeof__(fc->u.fc)){p, proj, NONE_ID, e, 0};
    uint32_t o3[3] = {1, (uint32_t)A, 4};
    ly_xb_reshape(x, e, ly_xb_define(x, n->outputs[0], CHANNELS_LAST), 3, o3);
}

LY_XNN_EXPORT(dfl, takes_dfl, emit_dfl);

static void emit_resize(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_resize_bilinear2d_params *p = n->params;
    uint32_t in = ly_xb_get(x, n->inputs[0], CHANNELS_LAST);
    uint32_t out = ly_xb_define(x, n->outputs[0], CHANNELS_LAST);
    ly_xnn_node *node = ly_xb_node(x, LY_XNN_STATIC_RESIZE_BILINEAR_2D);
    if (!node) return;
    uint32_t flags = 0;
    if (p->align_corners)
        flags = 0x8; /* XNN_FLAG_ALIGN_CORNERS */
    else if (!p->half_pixel_centers)
        flags = 0x4; /* XNN_FLAG_TENSORFLOW_LEGACY_MODE */
    node->u.resize =
        (__typeof__(node->u.resize)){(uint32_t)p->size[0], (uint32_t)p->size[1], in, out, flags};
}

LY_XNN_EXPORT(resize_bilinear2d, takes_4d, emit_resize);

/* A reshape is on the logical order, except [N, C, H, W] -> [N, C, H*W] of a
 * channels-last value: [N, H, W, C] -> [N, H*W, C] is the same move. */
static void emit_reshape(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_tensor *in_shape = &x->L->shape[n->inputs[0]], *out = &x->L->shape[n->outputs[0]];
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
    const ly_tensor *s = &x->L->shape[n->inputs[0]];
    if (x->xid[n->inputs[0]][CHANNELS_LAST] == NONE_ID || p->ndim != s->ndim) return false;
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
        uint32_t in = x->xid[n->inputs[0]][CHANNELS_LAST];
        if (ly_xb_ext_out_index(x, n->outputs[0]) >= 0)
            ly_xb_1x1(x, LY_XNN_COPY, in, ly_xb_define(x, n->outputs[0], LOGICAL));
        else
            x->xid[n->outputs[0]][LOGICAL] = in;
        return;
    }
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    uint32_t perm[LY_MAX_DIMS];
    for (int i = 0; i < p->ndim; i++)
        perm[i] = (uint32_t)p->perm[i];
    ly_xb_transpose(x, in, ly_xb_define(x, n->outputs[0], LOGICAL), (int)p->ndim, perm);
}

LY_XNN_EXPORT(permute, NULL, emit_permute);

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
    const ly_tensor *w = &x->L->shape[wv];
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    uint32_t wd[2] = {(uint32_t)w->shape[0], (uint32_t)w->shape[1]};
    size_t bytes = (size_t)ly_lower_numel(w) * sizeof(float);
    uint32_t filter =
        ly_xb_const(x, ly_xb_const_name(x, n->name, "weight"), 2, wd, x->L->known[wv], bytes);
    uint32_t bias = NONE_ID;
    if (bv != LY_GRAPH_NONE)
        bias = ly_xb_const(x, ly_xb_const_name(x, n->name, "bias"), 1, wd, x->L->known[bv],
                           (size_t)wd[0] * sizeof(float));
    bool gelu = act == LY_ACT_GELU, has_residual = residual != LY_GRAPH_NONE;
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(&x->L->shape[n->outputs[0]], LOGICAL, dims);
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
    const ly_tensor *a = &L->shape[n->inputs[0]], *b = &L->shape[n->inputs[1]];
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
        int nd = ly_xb_dims(&x->L->shape[n->inputs[1]], LOGICAL, dims);
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

/* over the last axis, as XNNPACK's softmax */
static bool takes_softmax(const ly_lowering *L, const ly_graph_node_info *n)
{
    const ly_tensor *a = &L->shape[n->inputs[0]];
    const ly_axis_params *p = n->params;
    return a->ndim >= 1 && ly_lower_axis(p ? p->axis : -1, a->ndim) == a->ndim - 1;
}

static void emit_softmax(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    ly_xb_1x1(x, LY_XNN_SOFTMAX, in, ly_xb_define(x, n->outputs[0], LOGICAL));
}

LY_XNN_EXPORT(softmax, takes_softmax, emit_softmax);

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
    int layout = ly_xb_have(x, n->inputs[0]);
    uint32_t in = ly_xb_get(x, n->inputs[0], layout);
    ly_xb_1x1(x, LY_XNN_LOG, in, ly_xb_define(x, n->outputs[0], layout));
}

LY_XNN_EXPORT(log, NULL, emit_log);

/* A fully-connected node over the last axis of `in` (logical dims `dims`,
 * rank nd) with a filter and bias of its own: the only way an emitter's own
 * constants may enter a partition (XNNPACK packs them). */
static uint32_t fc_const(ly_xnn_builder *x, const char *what, uint32_t in, int nd,
                         const uint32_t *dims, uint32_t n_out, const float *filter,
                         const float *bias)
{
    uint32_t k = dims[nd - 1], fd[2] = {n_out, k}, od[LY_MAX_DIMS];
    memcpy(od, dims, (size_t)nd * sizeof *od);
    od[nd - 1] = n_out;
    uint32_t f = ly_xb_const(x, ly_xb_const_name(x, x->node_name, what), 2, fd, filter,
                             (size_t)n_out * k * sizeof(float));
    uint32_t b = bias ? ly_xb_const(x, ly_xb_const_name(x, x->node_name, "bias"), 1, fd, bias,
                                    (size_t)n_out * sizeof(float))
                      : NONE_ID;
    uint32_t out = ly_xb_internal(x, nd, od);
    ly_xnn_node *fc = ly_xb_node(x, LY_XNN_FULLY_CONNECTED);
    if (fc) fc->u.fc = (__typeof__(fc->u.fc)){in, f, b, out, 0};
    return out;
}

/* RMSNorm as torch.export decomposes it, on XNNPACK nodes: x * rsqrt(mean(x²)
 * + eps) * scale, the mean and the eps one fully-connected node (a filter of
 * 1/C and a bias of eps, both packed). */
static void emit_rms_norm(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = &x->L->shape[n->inputs[0]];
    const ly_norm_params *p = n->params;
    uint32_t in = ly_xb_get(x, n->inputs[0], LOGICAL);
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(s, LOGICAL, dims);
    uint32_t c = dims[nd - 1];
    float *mean = ly_lower_calloc(&x->L->mem, c + 1, sizeof(float));
    if (!mean) {
        x->st = ly_lower_oom();
        return;
    }
    for (uint32_t i = 0; i < c; i++)
        mean[i] = 1.0f / (float)c;
    mean[c] = (float)(p ? p->eps : 1e-6);
    uint32_t sq = ly_xb_internal(x, nd, dims);
    ly_xb_1x1(x, LY_XNN_SQUARE, in, sq);
    uint32_t ms = fc_const(x, "mean", sq, nd, dims, 1, mean, &mean[c]);
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

/* no masks; q, k, v of one batch and head layout */
static bool takes_sdpa(const ly_lowering *L, const ly_graph_node_info *n)
{
    for (int i = 3; i < n->n_inputs; i++)
        if (n->inputs[i] != LY_GRAPH_NONE) return false;
    return L->shape[n->inputs[0]].ndim == 4;
}

/* sdpa as the manual expression (captures never take the fused path):
 * softmax((q * scale) · kᵀ) · v, the scale a fully-connected node with a
 * diagonal filter (exact: one product, zeros added), kᵀ a static transpose. */
static void emit_sdpa(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_sdpa_params *p = n->params;
    const ly_tensor *qs = &x->L->shape[n->inputs[0]], *ks = &x->L->shape[n->inputs[1]];
    uint32_t q = ly_xb_get(x, n->inputs[0], LOGICAL), k = ly_xb_get(x, n->inputs[1], LOGICAL),
             v = ly_xb_get(x, n->inputs[2], LOGICAL);
    uint32_t qd[4], kd[4];
    ly_xb_dims(qs, LOGICAL, qd);
    ly_xb_dims(ks, LOGICAL, kd);
    uint32_t d = qd[3];
    double scale = p && p->scale != 0.0 ? p->scale : 1.0 / sqrt((double)d);
    float *diag = ly_lower_calloc(&x->L->mem, (size_t)d * d, sizeof(float));
    if (!diag) {
        x->st = ly_lower_oom();
        return;
    }
    for (uint32_t i = 0; i < d; i++)
        diag[i * d + i] = (float)scale;
    uint32_t qscaled = fc_const(x, "scale", q, 4, qd, d, diag, NULL);
    uint32_t kt_dims[4] = {kd[0], kd[1], kd[3], kd[2]}, swap_last[4] = {0, 1, 3, 2};
    uint32_t kt = ly_xb_internal(x, 4, kt_dims);
    ly_xb_transpose(x, k, kt, 4, swap_last);
    uint32_t sd[4] = {qd[0], qd[1], qd[2], kd[2]};
    uint32_t scores = ly_xb_internal(x, 4, sd), probs = ly_xb_internal(x, 4, sd);
    ly_xb_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, qscaled, kt, scores);
    ly_xb_1x1(x, LY_XNN_SOFTMAX, scores, probs);
    ly_xb_2x1(x, LY_XNN_BATCH_MATRIX_MULTIPLY, probs, v, ly_xb_define(x, n->outputs[0], LOGICAL));
}

LY_XNN_EXPORT(sdpa, takes_sdpa, emit_sdpa);

static void emit_gelu(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    int layout = ly_xb_have(x, n->inputs[0]);
    uint32_t in = ly_xb_get(x, n->inputs[0], layout);
    ly_xb_1x1(x, LY_XNN_GELU, in, ly_xb_define(x, n->outputs[0], layout));
}

LY_XNN_EXPORT(gelu, NULL, emit_gelu);
