/* SPDX-License-Identifier: MIT */
/* What the network ops become in an ExecuTorch program (ops/op_export.h):
 * convolutions, pools, SiLU and sigmoid, DFL and resizing as XNNPACK nodes on
 * channels-last values; nearest upsampling and an average pool that counts its
 * padding as portable calls. */
#include "ops/op_export.h"

#include <math.h>

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
    const ly_tensor *w = ly_xb_shape(x, wv);
    const ly_tensor *out_shape = ly_xb_shape(x, n->outputs[0]);
    int64_t O = w->shape[0], Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3];
    int64_t G = p->groups > 0 ? p->groups : 1;
    bool depthwise = Cg == 1;
    uint32_t in = ly_xb_get(x, n->inputs[0], CHANNELS_LAST);
    float *filter = ly_xb_alloc(x, (size_t)(O * Cg * KH * KW), sizeof(float));
    if (!filter) return;
    const float *src = ly_xb_known(x, wv);
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
        bias_id = ly_xb_const(x, ly_xb_const_name(x, n->name, "bias"), 1, &bd, ly_xb_known(x, bv),
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
        float *k = ly_xb_alloc(x, (size_t)(2 * O), sizeof(float));
        if (!k) return;
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

LY_XNN_EXPORT(max_pool2d, ly_lower_takes_4d, emit_max_pool);

static void emit_avg_pool(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    emit_pool(x, n, LY_XNN_AVG_POOLING_2D);
}

LY_XNN_EXPORT(avg_pool2d, ly_lower_takes_4d, emit_avg_pool);

static void emit_sigmoid(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    ly_xb_unary(x, n, LY_XNN_SIGMOID);
}

LY_XNN_EXPORT(sigmoid, NULL, emit_sigmoid);

static void emit_silu(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    int layout = ly_xb_have(x, n->inputs[0]);
    uint32_t in = ly_xb_get(x, n->inputs[0], layout);
    uint32_t dims[LY_MAX_DIMS] = {0};
    int nd = ly_xb_dims(ly_xb_shape(x, n->outputs[0]), layout, dims);
    uint32_t s = ly_xb_internal(x, nd, dims);
    ly_xb_1x1(x, LY_XNN_SIGMOID, in, s);
    ly_xb_2x1(x, LY_XNN_MULTIPLY, in, s, ly_xb_define(x, n->outputs[0], layout));
}

LY_XNN_EXPORT(silu, NULL, emit_silu);

static bool takes_dfl(const ly_lowering *L, const ly_graph_node_info *n)
{
    return ly_lower_shape(L, n->inputs[0])->ndim == 3;
}

static void emit_dfl(ly_xnn_builder *x, const ly_graph_node_info *n)
{
    const ly_tensor *s = ly_xb_shape(x, n->inputs[0]);
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
    uint32_t proj = ly_xb_arange_row(x, R);
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

LY_XNN_EXPORT(resize_bilinear2d, ly_lower_takes_4d, emit_resize);

/* upsample_nearest2d.vec_out(input, output_size?, scale_factors?, *, out) */
static void call_upsample(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    double scale = (double)((const ly_upsample_nearest2d_params *)n->params)->scale;
    const double scales[2] = {scale, scale};
    ly_lower_call_begin(L, k, LY_PTE_UPSAMPLE_NEAREST2D);
    ly_pte_call_value(k, ly_lower_pvalue(L, n->inputs[0]));
    ly_pte_call_none(k);
    ly_pte_call_double_list(k, 2, scales);
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
}

LY_PORTABLE_EXPORT(upsample_nearest2d, ly_lower_takes_4d, call_upsample);

/* XNNPACK's average pooling leaves padding out of the count: a pooling that
 * counts it runs as the portable kernel. */
static bool takes_avg_pool(const ly_lowering *L, const ly_graph_node_info *n)
{
    const ly_pool2d_params *p = n->params;
    return p->count_include_pad && (p->padding[0] > 0 || p->padding[1] > 0) &&
           ly_lower_is_4d(L, n->inputs[0]);
}

/* avg_pool2d.out(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
 * divisor_override?, *, out) */
static void call_avg_pool(ly_lowering *L, const ly_graph_node_info *n, ly_pte_call *k)
{
    const ly_pool2d_params *pool = n->params;
    ly_lower_call_begin(L, k, LY_PTE_AVG_POOL2D);
    ly_pte_call_value(k, ly_lower_pvalue(L, n->inputs[0]));
    ly_pte_call_int_list(k, 2, pool->kernel);
    ly_pte_call_int_list(k, 2, pool->stride);
    ly_pte_call_int_list(k, 2, pool->padding);
    ly_pte_call_bool(k, false);
    ly_pte_call_bool(k, pool->count_include_pad != 0);
    ly_pte_call_none(k);
    ly_pte_call_out(k, ly_lower_pvalue(L, n->outputs[0]));
}

LY_PORTABLE_EXPORT(avg_pool2d, takes_avg_pool, call_avg_pool);
