/* SPDX-License-Identifier: MIT */
/* The XNNPACK delegate payload: XH00 header, XNNGraph flatbuffer, inline constants (spec B3). */
#include "core/core.h"
#include "pte/pte_internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Node tables, described once for both directions ---------------------- */

typedef enum { FT_U32, FT_F32, FT_VEC } field_type;
typedef enum { R_PLAIN, R_ID, R_OPT_ID } field_role; /* OPT_ID may be LY_XNN_INVALID_ID */

typedef struct node_field {
    const char *name;
    field_type type;
    field_role role;
    size_t off;   /* in ly_xnn_node */
    size_t n_off; /* FT_VEC: the count */
} node_field;

#define NF(k, f, t, r)                                                                             \
    {                                                                                              \
#f, t, r, offsetof(ly_xnn_node, u.k.f), 0                                                  \
    }
#define U(k, f) NF(k, f, FT_U32, R_PLAIN)
#define ID(k, f) NF(k, f, FT_U32, R_ID)
#define OID(k, f) NF(k, f, FT_U32, R_OPT_ID)
#define F(k, f) NF(k, f, FT_F32, R_PLAIN)
#define V(k, f)                                                                                    \
    {                                                                                              \
#f, FT_VEC, R_PLAIN, offsetof(ly_xnn_node, u.k.f), offsetof(ly_xnn_node, u.k.n_##f)        \
    }

static const node_field f_1x1[] = {ID(n1x1, input_id), ID(n1x1, output_id), U(n1x1, flags)};
static const node_field f_2x1[] = {ID(n2x1, input1_id), ID(n2x1, input2_id), ID(n2x1, output_id),
                                   U(n2x1, flags)};
static const node_field f_conv[] = {U(conv, padding_top),
                                    U(conv, padding_right),
                                    U(conv, padding_bottom),
                                    U(conv, padding_left),
                                    U(conv, kernel_height),
                                    U(conv, kernel_width),
                                    U(conv, subsampling_height),
                                    U(conv, subsampling_width),
                                    U(conv, dilation_height),
                                    U(conv, dilation_width),
                                    U(conv, group_input_channels),
                                    U(conv, group_output_channels),
                                    U(conv, groups),
                                    U(conv, adjustment_height),
                                    U(conv, adjustment_width),
                                    ID(conv, input1_id),
                                    ID(conv, filter_id),
                                    OID(conv, bias_id),
                                    ID(conv, output_id),
                                    U(conv, flags)};
static const node_field f_pooling[] = {
    U(pooling, padding_top),    U(pooling, padding_right),  U(pooling, padding_bottom),
    U(pooling, padding_left),   U(pooling, pooling_height), U(pooling, pooling_width),
    U(pooling, stride_height),  U(pooling, stride_width),   U(pooling, dilation_height),
    U(pooling, dilation_width), ID(pooling, input_id),      ID(pooling, output_id),
    U(pooling, flags)};
/* Which concatenation inputs are used depends on the node type: checked separately. */
static const node_field f_cat[] = {U(cat, axis),      U(cat, input1_id), U(cat, input2_id),
                                   U(cat, input3_id), U(cat, input4_id), ID(cat, output_id),
                                   U(cat, flags),     U(cat, input5_id)};
static const node_field f_transpose[] = {U(transpose, num_dims), V(transpose, perm),
                                         ID(transpose, input_id), ID(transpose, output_id),
                                         U(transpose, flags)};
static const node_field f_resize[] = {U(resize, new_height), U(resize, new_width),
                                      ID(resize, input_id), ID(resize, output_id),
                                      U(resize, flags)};
static const node_field f_pad[] = {V(pad, pre_paddings),  V(pad, post_paddings),
                                   F(pad, padding_value), ID(pad, input_id),
                                   ID(pad, output_id),    U(pad, flags)};
static const node_field f_reshape[] = {U(reshape, num_dims), V(reshape, new_shape),
                                       ID(reshape, input_id), ID(reshape, output_id),
                                       U(reshape, flags)};
static const node_field f_slice[] = {U(slice, num_dims),  V(slice, offsets),    V(slice, sizes),
                                     ID(slice, input_id), ID(slice, output_id), U(slice, flags)};
static const node_field f_fc[] = {ID(fc, input1_id), ID(fc, filter_id), OID(fc, bias_id),
                                  ID(fc, output_id), U(fc, flags)};
static const node_field f_leaky[] = {F(leaky_relu, negative_slope), ID(leaky_relu, input_id),
                                     ID(leaky_relu, output_id), U(leaky_relu, flags)};
static const node_field f_elu[] = {F(elu, alpha), ID(elu, input_id), ID(elu, output_id),
                                   U(elu, flags)};
static const node_field f_sdpa[] = {ID(sdpa, query_id), ID(sdpa, key_id),   ID(sdpa, value_id),
                                    ID(sdpa, scale_id), OID(sdpa, mask_id), ID(sdpa, output_id),
                                    U(sdpa, flags)};
static const node_field f_argmax[] = {
    U(argmax_pooling, padding_top),      U(argmax_pooling, padding_right),
    U(argmax_pooling, padding_bottom),   U(argmax_pooling, padding_left),
    U(argmax_pooling, pooling_height),   U(argmax_pooling, pooling_width),
    ID(argmax_pooling, input_id),        ID(argmax_pooling, output_value_id),
    ID(argmax_pooling, output_index_id), U(argmax_pooling, flags)};

typedef struct kind_desc {
    const node_field *fields;
    size_t n;
} kind_desc;

#define KD(a)                                                                                      \
    {                                                                                              \
        a, sizeof a / sizeof a[0]                                                                  \
    }
static const kind_desc kinds[] = {
    [LY_XNN_KIND_1X1] = KD(f_1x1),
    [LY_XNN_KIND_2X1] = KD(f_2x1),
    [LY_XNN_KIND_CONV] = KD(f_conv),
    [LY_XNN_KIND_POOLING] = KD(f_pooling),
    [LY_XNN_KIND_CAT] = KD(f_cat),
    [LY_XNN_KIND_TRANSPOSE] = KD(f_transpose),
    [LY_XNN_KIND_RESIZE_BILINEAR] = KD(f_resize),
    [LY_XNN_KIND_CONSTANT_PAD] = KD(f_pad),
    [LY_XNN_KIND_RESHAPE] = KD(f_reshape),
    [LY_XNN_KIND_SLICE] = KD(f_slice),
    [LY_XNN_KIND_FULLY_CONNECTED] = KD(f_fc),
    [LY_XNN_KIND_LEAKY_RELU] = KD(f_leaky),
    [LY_XNN_KIND_ELU] = KD(f_elu),
    [LY_XNN_KIND_SDPA] = KD(f_sdpa),
    [LY_XNN_KIND_ARG_MAX_POOLING] = KD(f_argmax),
};

typedef struct node_type_info {
    const char *name;
    ly_xnn_node_kind kind;
} node_type_info;

static const node_type_info node_types[LY_XNN_NODE_TYPE_COUNT] = {
    [LY_XNN_ADD] = {"XNNAdd", LY_XNN_KIND_2X1},
    [LY_XNN_FULLY_CONNECTED] = {"XNNFullyConnected", LY_XNN_KIND_FULLY_CONNECTED},
    [LY_XNN_SOFTMAX] = {"XNNSoftmax", LY_XNN_KIND_1X1},
    [LY_XNN_SIGMOID] = {"XNNSigmoid", LY_XNN_KIND_1X1},
    [LY_XNN_STATIC_TRANSPOSE] = {"XNNStaticTranspose", LY_XNN_KIND_TRANSPOSE},
    [LY_XNN_CLAMP] = {"XNNClamp", LY_XNN_KIND_1X1},
    [LY_XNN_CONV2D] = {"XNNConv2d", LY_XNN_KIND_CONV},
    [LY_XNN_DIV] = {"XNNDiv", LY_XNN_KIND_2X1},
    [LY_XNN_STATIC_RESIZE_BILINEAR_2D] = {"XNNStaticResizeBilinear2D", LY_XNN_KIND_RESIZE_BILINEAR},
    [LY_XNN_STATIC_CONSTANT_PAD] = {"XNNStaticConstantPad", LY_XNN_KIND_CONSTANT_PAD},
    [LY_XNN_AVG_POOLING_2D] = {"XNNAvgPooling2d", LY_XNN_KIND_POOLING},
    [LY_XNN_MINIMUM] = {"XNNMinimum", LY_XNN_KIND_2X1},
    [LY_XNN_DEPTHWISE_CONV2D] = {"XNNDepthwiseConv2d", LY_XNN_KIND_CONV},
    [LY_XNN_MAX_POOLING_2D] = {"XNNMaxPooling2d", LY_XNN_KIND_POOLING},
    [LY_XNN_MULTIPLY] = {"XNNMultiply", LY_XNN_KIND_2X1},
    [LY_XNN_SUBTRACT] = {"XNNSubtract", LY_XNN_KIND_2X1},
    [LY_XNN_FLOOR] = {"XNNFloor", LY_XNN_KIND_1X1},
    [LY_XNN_CONVERT] = {"XNNConvert", LY_XNN_KIND_1X1},
    [LY_XNN_GLOBAL_AVG_POOLING_2D] = {"XNNGlobalAvgPooling2d", LY_XNN_KIND_1X1},
    [LY_XNN_STATIC_RESHAPE] = {"XNNStaticReshape", LY_XNN_KIND_RESHAPE},
    [LY_XNN_ARG_MAX_POOLING_2D] = {"XNNArgMaxPooling2d", LY_XNN_KIND_ARG_MAX_POOLING},
    [LY_XNN_SQUARE_ROOT] = {"XNNSquareRoot", LY_XNN_KIND_1X1},
    [LY_XNN_CEILING] = {"XNNCeiling", LY_XNN_KIND_1X1},
    [LY_XNN_HARDSWISH] = {"XNNHardswish", LY_XNN_KIND_1X1},
    [LY_XNN_LEAKY_RELU] = {"XNNLeakyReLU", LY_XNN_KIND_LEAKY_RELU},
    [LY_XNN_MAXIMUM] = {"XNNMaximum", LY_XNN_KIND_2X1},
    [LY_XNN_NEGATE] = {"XNNNegate", LY_XNN_KIND_1X1},
    [LY_XNN_SQUARE] = {"XNNSquare", LY_XNN_KIND_1X1},
    [LY_XNN_ELU] = {"XNNELU", LY_XNN_KIND_ELU},
    [LY_XNN_ABS] = {"XNNAbs", LY_XNN_KIND_1X1},
    [LY_XNN_PRELU] = {"XNNPReLU", LY_XNN_KIND_2X1},
    [LY_XNN_CONCATENATE2] = {"XNNConcatenate2", LY_XNN_KIND_CAT},
    [LY_XNN_CONCATENATE3] = {"XNNConcatenate3", LY_XNN_KIND_CAT},
    [LY_XNN_CONCATENATE4] = {"XNNConcatenate4", LY_XNN_KIND_CAT},
    [LY_XNN_STATIC_SLICE] = {"XNNStaticSlice", LY_XNN_KIND_SLICE},
    [LY_XNN_SCALED_DOT_PRODUCT_ATTENTION] = {"XNNScaledDotProductAttention", LY_XNN_KIND_SDPA},
    [LY_XNN_BATCH_MATRIX_MULTIPLY] = {"XNNBatchMatrixMultiply", LY_XNN_KIND_2X1},
    [LY_XNN_CONCATENATE5] = {"XNNConcatenate5", LY_XNN_KIND_CAT},
    [LY_XNN_CONV_TRANSPOSE_2D] = {"XNNConvTranspose2d", LY_XNN_KIND_CONV},
    [LY_XNN_RECIPROCAL_SQUARE_ROOT] = {"XNNReciprocalSquareRoot", LY_XNN_KIND_1X1},
    [LY_XNN_LOG] = {"XNNLog", LY_XNN_KIND_1X1},
    [LY_XNN_GELU] = {"XNNGelu", LY_XNN_KIND_1X1},
    [LY_XNN_TANH] = {"XNNTanh", LY_XNN_KIND_1X1},
    [LY_XNN_EXP] = {"XNNExp", LY_XNN_KIND_1X1},
    [LY_XNN_SIN] = {"XNNSin", LY_XNN_KIND_1X1},
    [LY_XNN_COPY] = {"XNNCopy", LY_XNN_KIND_1X1},
    [LY_XNN_COS] = {"XNNCos", LY_XNN_KIND_1X1},
};

ly_xnn_node_kind ly_xnn_node_kind_of(int node_type)
{
    if (node_type <= 0 || node_type >= LY_XNN_NODE_TYPE_COUNT) return LY_XNN_KIND_INVALID;
    return node_types[node_type].kind;
}

const char *ly_xnn_node_name(int node_type)
{
    if (ly_xnn_node_kind_of(node_type) == LY_XNN_KIND_INVALID) return "?";
    return node_types[node_type].name;
}

/* Inputs used by ConcatenateN. */
static int cat_inputs(int node_type)
{
    switch (node_type) {
    case LY_XNN_CONCATENATE2:
        return 2;
    case LY_XNN_CONCATENATE3:
        return 3;
    case LY_XNN_CONCATENATE4:
        return 4;
    case LY_XNN_CONCATENATE5:
        return 5;
    default:
        return 0;
    }
}

/* Field slots of the XNNPACK schema. */
enum {
    GRAPH_VERSION,
    GRAPH_XNODES,
    GRAPH_XVALUES,
    GRAPH_NUM_EXTERNS,
    GRAPH_INPUT_IDS,
    GRAPH_OUTPUT_IDS,
    GRAPH_CONSTANT_BUFFER /* deprecated */,
    GRAPH_MEM_BUFFER_SIZES /* deprecated */,
    GRAPH_CONSTANT_DATA
};
enum {
    TV_DATATYPE,
    TV_NUM_DIMS,
    TV_DIMS,
    TV_CONSTANT_BUFFER_IDX,
    TV_EXTERNAL_ID,
    TV_FLAGS,
    TV_ID_OUT,
    TV_DQ_DATATYPE
};

/* ---- Encoding ------------------------------------------------------------ */

static fb_ref enc_tensor_value(fb_builder *b, const ly_xnn_tensor_value *t)
{
    fb_ref dims = fb_vec_scalars(b, t->dims, t->n_dims, 4, 4);
    fb_table_start(b);
    fb_add_u16(b, TV_DATATYPE, (uint16_t)t->datatype, 0);
    fb_add_u32(b, TV_NUM_DIMS, t->num_dims, 0);
    fb_add_ref(b, TV_DIMS, dims);
    fb_add_u32(b, TV_CONSTANT_BUFFER_IDX, t->constant_buffer_idx, 0);
    fb_add_u32(b, TV_EXTERNAL_ID, t->external_id, 0);
    fb_add_u32(b, TV_FLAGS, t->flags, 0);
    fb_add_u32(b, TV_ID_OUT, t->id_out, 0);
    /* dq_datatype exists only in the runtime schema (XN00); the XN01 writer never emits it. */
    return fb_table_end(b);
}

static fb_ref enc_quant(fb_builder *b, const ly_xnn_quant_params *q)
{
    fb_ref scale = 0, bf16 = 0;
    if (q->type == LY_XNN_PER_CHANNEL_QUANT || q->type == LY_XNN_PER_CHANNEL_GROUP_QUANT)
        scale = fb_vec_scalars(b, q->scale, q->n_scale, 4, 4);
    if (q->type == LY_XNN_PER_CHANNEL_GROUP_QUANT && q->scale_bf16)
        bf16 = fb_vec_scalars(b, q->scale_bf16, q->n_scale_bf16, 2, 2);
    fb_table_start(b);
    switch (q->type) {
    case LY_XNN_PER_CHANNEL_QUANT:
        fb_add_ref(b, 0, scale);
        fb_add_u32(b, 1, (uint32_t)q->channel_dim, 0);
        break;
    case LY_XNN_PER_TENSOR_QUANT:
        fb_add_f32(b, 0, q->tensor_scale, 0.0f);
        fb_add_u32(b, 1, (uint32_t)q->zero_point, 0);
        break;
    case LY_XNN_PER_TOKEN_DYNAMIC_QUANT:
        fb_add_u32(b, 0, (uint32_t)q->num_nonbatch_dims, 0);
        break;
    case LY_XNN_PER_CHANNEL_GROUP_QUANT:
        fb_add_ref(b, 0, scale);
        fb_add_u32(b, 1, (uint32_t)q->channel_dim, 0);
        fb_add_u32(b, 2, (uint32_t)q->group_size, 0);
        fb_add_ref(b, 3, bf16);
        break;
    case LY_XNN_QUANT_NONE:
        break;
    }
    return fb_table_end(b);
}

static fb_ref enc_value(fb_builder *b, const ly_xnn_value *v)
{
    fb_ref val = 0;
    if (v->type == LY_XNN_TENSOR_VALUE) {
        val = enc_tensor_value(b, &v->tensor);
    } else if (v->type == LY_XNN_QUANTIZED_TENSOR_VALUE) {
        fb_ref tv = enc_tensor_value(b, &v->tensor);
        fb_ref q = v->quant.type != LY_XNN_QUANT_NONE ? enc_quant(b, &v->quant) : 0;
        fb_table_start(b);
        fb_add_ref(b, 0, tv);
        fb_add_u8(b, 1, (uint8_t)v->quant.type, 0);
        fb_add_ref(b, 2, q);
        val = fb_table_end(b);
    }
    fb_table_start(b);
    fb_add_u8(b, 0, (uint8_t)v->type, 0);
    fb_add_ref(b, 1, val);
    return fb_table_end(b);
}

static fb_ref enc_node(fb_builder *b, const ly_xnn_node *n)
{
    ly_xnn_node_kind kind = ly_xnn_node_kind_of(n->type);
    fb_ref val = 0, mm = 0;
    if (kind != LY_XNN_KIND_INVALID) {
        const kind_desc *kd = &kinds[kind];
        fb_ref vecs[8] = {0};
        const uint8_t *base = (const uint8_t *)n;
        for (size_t i = 0; i < kd->n; i++) {
            if (kd->fields[i].type != FT_VEC) continue;
            const uint32_t *items;
            size_t count;
            memcpy(&items, base + kd->fields[i].off, sizeof items);
            memcpy(&count, base + kd->fields[i].n_off, sizeof count);
            vecs[i] = fb_vec_scalars(b, items, count, 4, 4);
        }
        fb_table_start(b);
        for (size_t i = 0; i < kd->n; i++) {
            const node_field *f = &kd->fields[i];
            if (f->type == FT_VEC) {
                fb_add_ref(b, (int)i, vecs[i]);
            } else if (f->type == FT_F32) {
                float x;
                memcpy(&x, base + f->off, 4);
                fb_add_f32(b, (int)i, x, 0.0f);
            } else {
                uint32_t x;
                memcpy(&x, base + f->off, 4);
                fb_add_u32(b, (int)i, x, 0);
            }
        }
        val = fb_table_end(b);
    }
    if (n->has_output_min_max) {
        fb_table_start(b);
        fb_add_f32(b, 0, n->output_min, 0.0f);
        fb_add_f32(b, 1, n->output_max, 0.0f);
        mm = fb_table_end(b);
    }
    fb_table_start(b);
    fb_add_u8(b, 0, (uint8_t)n->type, 0);
    fb_add_ref(b, 1, val);
    fb_add_u32(b, 2, n->debug_handle, 0);
    fb_add_ref(b, 3, mm);
    return fb_table_end(b);
}

static fb_ref enc_constant(fb_builder *b, const ly_xnn_constant_data *c)
{
    fb_ref key = fb_string(b, c->named_key);
    fb_table_start(b);
    fb_add_u64(b, 0, c->offset, 0);
    fb_add_u64(b, 1, c->size, 0);
    fb_add_ref(b, 2, key);
    return fb_table_end(b);
}

ly_status ly_xnn_encode_unchecked(const ly_xnn_graph *g, const uint8_t *constant_area,
                                  size_t constant_size, uint8_t **bytes, size_t *size)
{
    if (!g || !bytes || !size || (constant_size && !constant_area))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_xnn_encode: NULL argument");
    *bytes = NULL;
    *size = 0;
    size_t n_refs = g->n_xnodes > g->n_xvalues ? g->n_xnodes : g->n_xvalues;
    if (g->n_constant_data > n_refs) n_refs = g->n_constant_data;
    fb_ref *refs = calloc(n_refs ? n_refs : 1, sizeof *refs);
    if (!refs) return ly_set_error(LY_E_NO_MEMORY, "ly_xnn_encode: out of memory");

    fb_builder b;
    fb_init(&b);
    fb_ref version = fb_string(&b, g->version ? g->version : "0");
    for (size_t i = 0; i < g->n_xnodes; i++)
        refs[i] = enc_node(&b, &g->xnodes[i]);
    fb_ref nodes = fb_vec_refs(&b, refs, g->n_xnodes);
    for (size_t i = 0; i < g->n_xvalues; i++)
        refs[i] = enc_value(&b, &g->xvalues[i]);
    fb_ref values = fb_vec_refs(&b, refs, g->n_xvalues);
    fb_ref inputs = fb_vec_scalars(&b, g->input_ids, g->n_input_ids, 4, 4);
    fb_ref outputs = fb_vec_scalars(&b, g->output_ids, g->n_output_ids, 4, 4);
    for (size_t i = 0; i < g->n_constant_data; i++)
        refs[i] = enc_constant(&b, &g->constant_data[i]);
    fb_ref constants = fb_vec_refs(&b, refs, g->n_constant_data);
    free(refs);
    fb_table_start(&b);
    fb_add_ref(&b, GRAPH_VERSION, version);
    fb_add_ref(&b, GRAPH_XNODES, nodes);
    fb_add_ref(&b, GRAPH_XVALUES, values);
    fb_add_u32(&b, GRAPH_NUM_EXTERNS, g->num_externs, 0);
    fb_add_ref(&b, GRAPH_INPUT_IDS, inputs);
    fb_add_ref(&b, GRAPH_OUTPUT_IDS, outputs);
    fb_add_ref(&b, GRAPH_CONSTANT_DATA, constants);
    fb_ref root = fb_table_end(&b);
    uint8_t *fbuf;
    size_t fsize;
    bool ok = fb_finish(&b, root, LY_XNN_FILE_IDENTIFIER, &fbuf, &fsize);
    fb_free(&b);
    if (!ok) return ly_set_error(LY_E_NO_MEMORY, "ly_xnn_encode: the XNNGraph could not be built");

    size_t fb_padded = (size_t)ly_pte_align_up(fsize, 16);
    size_t total = LY_XNN_HEADER_PADDED + fb_padded + constant_size;
    if (fsize > UINT32_MAX || LY_XNN_HEADER_PADDED + fb_padded > UINT32_MAX ||
        total < constant_size) {
        free(fbuf);
        return ly_set_error(LY_E_UNSUPPORTED, "ly_xnn_encode: payload over 4 GiB");
    }
    uint8_t *out = calloc(1, total);
    if (!out) {
        free(fbuf);
        return ly_set_error(LY_E_NO_MEMORY, "ly_xnn_encode: out of memory");
    }
    memcpy(out + 4, LY_XNN_HEADER_MAGIC, 4);
    fb_st16(out + 8, LY_XNN_HEADER_LENGTH);
    fb_st32(out + 10, LY_XNN_HEADER_PADDED);
    fb_st32(out + 14, (uint32_t)fsize);
    fb_st32(out + 18, (uint32_t)(LY_XNN_HEADER_PADDED + fb_padded));
    fb_st64(out + 22, constant_size);
    memcpy(out + LY_XNN_HEADER_PADDED, fbuf, fsize);
    if (constant_size) memcpy(out + LY_XNN_HEADER_PADDED + fb_padded, constant_area, constant_size);
    free(fbuf);
    *bytes = out;
    *size = total;
    return LY_OK;
}

ly_status ly_xnn_encode(const ly_xnn_graph *g, const uint8_t *constant_area, size_t constant_size,
                        uint8_t **bytes, size_t *size)
{
    ly_status st = ly_xnn_encode_unchecked(g, constant_area, constant_size, bytes, size);
    if (st != LY_OK) return st;
    ly_xnn_graph *check = NULL;
    st = ly_xnn_decode(*bytes, *size, "ly_xnn_encode", &check);
    ly_xnn_graph_free(check);
    if (st != LY_OK) {
        free(*bytes);
        *bytes = NULL;
        *size = 0;
    }
    return st;
}

/* ---- Decoding ------------------------------------------------------------ */

static bool dec_tensor_value(dec *d, const fb_table *t, ly_xnn_tensor_value *tv)
{
    fb_reader *r = &d->r;
    uint16_t dt = 0, dq = 0;
    bool ok =
        fb_u16(r, t, TV_DATATYPE, "datatype", 0, &dt) &&
        fb_u32(r, t, TV_NUM_DIMS, "num_dims", 0, &tv->num_dims) &&
        READ_VEC(d, t, TV_DIMS, "dims", tv->dims, tv->n_dims) &&
        fb_u32(r, t, TV_CONSTANT_BUFFER_IDX, "constant_buffer_idx", 0, &tv->constant_buffer_idx) &&
        fb_u32(r, t, TV_EXTERNAL_ID, "external_id", 0, &tv->external_id) &&
        fb_u32(r, t, TV_FLAGS, "flags", 0, &tv->flags) &&
        fb_u32(r, t, TV_ID_OUT, "id_out", 0, &tv->id_out) &&
        fb_u16(r, t, TV_DQ_DATATYPE, "dq_datatype", 0, &dq);
    tv->datatype = (int16_t)dt;
    tv->dq_datatype = (int16_t)dq;
    return ok;
}

static bool dec_quant(dec *d, const fb_table *t, ly_xnn_quant_params *q)
{
    fb_reader *r = &d->r;
    uint32_t a = 0, b = 0;
    switch (q->type) {
    case LY_XNN_PER_CHANNEL_QUANT:
        if (!READ_VEC(d, t, 0, "scale", q->scale, q->n_scale) ||
            !fb_u32(r, t, 1, "channel_dim", 0, &a))
            return false;
        q->channel_dim = (int32_t)a;
        return true;
    case LY_XNN_PER_TENSOR_QUANT:
        if (!fb_f32(r, t, 0, "scale", 0.0f, &q->tensor_scale) ||
            !fb_u32(r, t, 1, "zero_point", 0, &a))
            return false;
        q->zero_point = (int32_t)a;
        return true;
    case LY_XNN_PER_TOKEN_DYNAMIC_QUANT:
        if (!fb_u32(r, t, 0, "num_nonbatch_dims", 0, &a)) return false;
        q->num_nonbatch_dims = (int32_t)a;
        return true;
    case LY_XNN_PER_CHANNEL_GROUP_QUANT:
        if (!READ_VEC(d, t, 0, "scale", q->scale, q->n_scale) ||
            !fb_u32(r, t, 1, "channel_dim", 0, &a) || !fb_u32(r, t, 2, "group_size", 0, &b) ||
            !READ_VEC(d, t, 3, "scale_bf16", q->scale_bf16, q->n_scale_bf16))
            return false;
        q->channel_dim = (int32_t)a;
        q->group_size = (int32_t)b;
        return true;
    case LY_XNN_QUANT_NONE:
        break;
    }
    return true;
}

static bool dec_value(dec *d, const fb_table *t, void *item)
{
    ly_xnn_value *v = item;
    fb_reader *r = &d->r;
    uint8_t type;
    fb_table val, sub;
    bool present;
    if (!fb_u8(r, t, 0, "xvalue_union_type", 0, &type)) return false;
    if (type != LY_XNN_TENSOR_VALUE && type != LY_XNN_QUANTIZED_TENSOR_VALUE)
        return fb_fail(r, "xvalue_union_type",
                       "%u is not an XValueUnion member (1 XNNTensorValue, 2 "
                       "XNNQuantizedTensorValue)",
                       type);
    v->type = (ly_xnn_value_type)type;
    if (!fb_sub(r, t, 1, "xvalue_union", &val, &present)) return false;
    if (!present) return fb_fail(r, "xvalue_union", "union type %u without a value", type);
    size_t saved = fb_path_push(r, "xvalue_union", -1);
    if (type == LY_XNN_TENSOR_VALUE) {
        if (!dec_tensor_value(d, &val, &v->tensor)) return false;
    } else {
        uint8_t qt;
        if (!fb_sub(r, &val, 0, "tensor_value", &sub, &present)) return false;
        if (!present) return fb_fail(r, "tensor_value", "missing");
        size_t s2 = fb_path_push(r, "tensor_value", -1);
        if (!dec_tensor_value(d, &sub, &v->tensor)) return false;
        fb_path_pop(r, s2);
        if (!fb_u8(r, &val, 1, "quant_params_type", 0, &qt)) return false;
        if (qt == 0 || qt > LY_XNN_PER_CHANNEL_GROUP_QUANT)
            return fb_fail(r, "quant_params_type", "%u is not an XNNQuantParams member (1..4)", qt);
        v->quant.type = (ly_xnn_quant_type)qt;
        if (!fb_sub(r, &val, 2, "quant_params", &sub, &present)) return false;
        if (!present) return fb_fail(r, "quant_params", "union type %u without a value", qt);
        s2 = fb_path_push(r, "quant_params", -1);
        if (!dec_quant(d, &sub, &v->quant)) return false;
        fb_path_pop(r, s2);
    }
    fb_path_pop(r, saved);
    return true;
}

static bool dec_node(dec *d, const fb_table *t, void *item)
{
    ly_xnn_node *n = item;
    fb_reader *r = &d->r;
    uint8_t type;
    fb_table val, mm;
    bool present;
    if (!fb_u8(r, t, 0, "xnode_union_type", 0, &type)) return false;
    ly_xnn_node_kind kind = ly_xnn_node_kind_of(type);
    if (kind == LY_XNN_KIND_INVALID)
        return fb_fail(r, "xnode_union_type", "%u is not an XNodeUnion member (1..%d)", type,
                       LY_XNN_NODE_TYPE_COUNT - 1);
    n->type = (ly_xnn_node_type)type;
    if (!fb_sub(r, t, 1, "xnode_union", &val, &present)) return false;
    if (!present)
        return fb_fail(r, "xnode_union", "union type %s without a value", ly_xnn_node_name(type));
    if (!fb_u32(r, t, 2, "debug_handle", 0, &n->debug_handle)) return false;
    if (!fb_sub(r, t, 3, "output_min_max", &mm, &present)) return false;
    if (present) {
        n->has_output_min_max = true;
        if (!fb_f32(r, &mm, 0, "output_min_max.output_min", 0.0f, &n->output_min) ||
            !fb_f32(r, &mm, 1, "output_min_max.output_max", 0.0f, &n->output_max))
            return false;
    }
    char name[48];
    snprintf(name, sizeof name, "(%s)", ly_xnn_node_name(type));
    size_t saved = fb_path_push(r, name, -1);
    const kind_desc *kd = &kinds[kind];
    uint8_t *base = (uint8_t *)n;
    for (size_t i = 0; i < kd->n; i++) {
        const node_field *f = &kd->fields[i];
        if (f->type == FT_VEC) {
            uint32_t *items;
            size_t count;
            if (!READ_VEC(d, &val, (int)i, f->name, items, count)) return false;
            memcpy(base + f->off, &items, sizeof items);
            memcpy(base + f->n_off, &count, sizeof count);
        } else {
            uint32_t x;
            if (!fb_u32(r, &val, (int)i, f->name, 0, &x)) return false;
            memcpy(base + f->off, &x, 4); /* a float's bits, or a uint32 */
        }
    }
    fb_path_pop(r, saved);
    return true;
}

static bool dec_constant(dec *d, const fb_table *t, void *item)
{
    ly_xnn_constant_data *c = item;
    return fb_u64(&d->r, t, 0, "offset", 0, &c->offset) &&
           fb_u64(&d->r, t, 1, "size", 0, &c->size) &&
           fb_str(&d->r, t, 2, "named_key", &c->named_key, NULL);
}

static ly_status xerr(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ly_status xerr(const char *what, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ly_set_error(LY_E_FORMAT, "%s: %s", what, msg);
}

static ly_status check_id(const char *what, size_t i, const char *field, uint32_t id, bool optional,
                          size_t n_values)
{
    if (optional && id == LY_XNN_INVALID_ID) return LY_OK;
    if (id >= n_values)
        return xerr(what, "xnodes[%zu]%s: value id %u is out of range (%zu xvalues)", i, field, id,
                    n_values);
    return LY_OK;
}

static ly_status validate_graph(const ly_xnn_graph *g, const char *what)
{
    ly_status st;
    if (!g->xnodes) return xerr(what, "xnodes: missing");
    if (!g->xvalues) return xerr(what, "xvalues: missing");
    if (g->num_externs > 4096 || g->num_externs > g->n_xvalues)
        return xerr(what, "num_externs: %u (expected at most min(4096, %zu xvalues))",
                    g->num_externs, g->n_xvalues);
    for (size_t i = 0; i < g->n_xvalues; i++) {
        const ly_xnn_tensor_value *tv = &g->xvalues[i].tensor;
        if (tv->datatype < LY_XNN_DT_FP32 || tv->datatype > LY_XNN_DT_BF16)
            return xerr(what, "xvalues[%zu].datatype: %d is not an XNNDatatype (1..14)", i,
                        tv->datatype);
        if (tv->id_out != i)
            return xerr(what, "xvalues[%zu].id_out: %u, expected its index %zu", i, tv->id_out, i);
        if (tv->num_dims != tv->n_dims)
            return xerr(what, "xvalues[%zu].dims: %zu entries, num_dims says %u", i, tv->n_dims,
                        tv->num_dims);
        if (tv->num_dims > 6) /* XNN_MAX_TENSOR_DIMS */
            return xerr(what, "xvalues[%zu].num_dims: %u exceeds XNNPACK's limit of 6", i,
                        tv->num_dims);
        if (tv->external_id != LY_XNN_INVALID_ID && tv->external_id >= g->num_externs)
            return xerr(what, "xvalues[%zu].external_id: %u is out of range (num_externs %u)", i,
                        tv->external_id, g->num_externs);
        if (tv->constant_buffer_idx && tv->constant_buffer_idx >= g->n_constant_data)
            return xerr(what,
                        "xvalues[%zu].constant_buffer_idx: %u is out of range (%zu constant_data)",
                        i, tv->constant_buffer_idx, g->n_constant_data);
        const ly_xnn_quant_params *q = &g->xvalues[i].quant;
        if (g->xvalues[i].type == LY_XNN_QUANTIZED_TENSOR_VALUE &&
            (q->type == LY_XNN_PER_CHANNEL_QUANT || q->type == LY_XNN_PER_CHANNEL_GROUP_QUANT) &&
            !q->scale && !q->scale_bf16)
            return xerr(what, "xvalues[%zu].quant_params.scale: missing", i);
    }
    for (size_t i = 0; i < g->n_constant_data; i++) {
        const ly_xnn_constant_data *c = &g->constant_data[i];
        if (c->named_key && c->named_key[0]) continue; /* resolved through the program */
        if (!ly_pte_range_within(c->offset, c->size, g->constant_area.size))
            return xerr(what,
                        "constant_data[%zu]: %llu bytes at offset %llu run past the %zu-byte "
                        "inline constant area",
                        i, (unsigned long long)c->size, (unsigned long long)c->offset,
                        g->constant_area.size);
    }
    for (size_t i = 0; i < g->n_input_ids; i++)
        if (g->input_ids[i] >= g->n_xvalues)
            return xerr(what, "input_ids[%zu]: %u is out of range (%zu xvalues)", i,
                        g->input_ids[i], g->n_xvalues);
    for (size_t i = 0; i < g->n_output_ids; i++)
        if (g->output_ids[i] >= g->n_xvalues)
            return xerr(what, "output_ids[%zu]: %u is out of range (%zu xvalues)", i,
                        g->output_ids[i], g->n_xvalues);
    for (size_t i = 0; i < g->n_xnodes; i++) {
        const ly_xnn_node *n = &g->xnodes[i];
        const kind_desc *kd = &kinds[ly_xnn_node_kind_of(n->type)];
        const uint8_t *base = (const uint8_t *)n;
        char field[96];
        for (size_t j = 0; j < kd->n; j++) {
            const node_field *f = &kd->fields[j];
            if (f->role == R_PLAIN) continue;
            uint32_t id;
            memcpy(&id, base + f->off, 4);
            snprintf(field, sizeof field, "(%s).%s", ly_xnn_node_name(n->type), f->name);
            if ((st = check_id(what, i, field, id, f->role == R_OPT_ID, g->n_xvalues))) return st;
        }
        int nc = cat_inputs(n->type);
        const uint32_t cat_ids[5] = {n->u.cat.input1_id, n->u.cat.input2_id, n->u.cat.input3_id,
                                     n->u.cat.input4_id, n->u.cat.input5_id};
        for (int j = 0; j < nc; j++) {
            snprintf(field, sizeof field, "(%s).input%d_id", ly_xnn_node_name(n->type), j + 1);
            if ((st = check_id(what, i, field, cat_ids[j], false, g->n_xvalues))) return st;
        }
        size_t want = 0, got = 0;
        const char *vec = NULL;
        switch (ly_xnn_node_kind_of(n->type)) {
        case LY_XNN_KIND_TRANSPOSE:
            want = n->u.transpose.num_dims, got = n->u.transpose.n_perm, vec = "perm";
            break;
        case LY_XNN_KIND_RESHAPE:
            want = n->u.reshape.num_dims, got = n->u.reshape.n_new_shape, vec = "new_shape";
            break;
        case LY_XNN_KIND_SLICE:
            want = n->u.slice.num_dims, got = n->u.slice.n_offsets, vec = "offsets";
            if (got == want && n->u.slice.n_sizes != want) got = n->u.slice.n_sizes, vec = "sizes";
            break;
        case LY_XNN_KIND_CONSTANT_PAD:
            want = n->u.pad.n_pre_paddings, got = n->u.pad.n_post_paddings, vec = "post_paddings";
            break;
        default:
            break;
        }
        if (vec && (got != want || want > 6))
            return xerr(what, "xnodes[%zu](%s).%s: %zu entries, expected %zu (at most 6)", i,
                        ly_xnn_node_name(n->type), vec, got, want);
    }
    return LY_OK;
}

ly_status ly_xnn_decode(const uint8_t *blob, size_t size, const char *what, ly_xnn_graph **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_xnn_decode: NULL output");
    *out = NULL;
    if (!what) what = "ly_xnn_decode";
    if (!blob && size) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: NULL blob", what);

    const uint8_t *fbp = blob;
    size_t fbsize = size;
    ly_pte_bytes area = {NULL, 0};
    bool has_header = size >= 8 && memcmp(blob + 4, LY_XNN_HEADER_MAGIC, 4) == 0;
    if (has_header) {
        if (size < LY_XNN_HEADER_LENGTH)
            return xerr(what, "XNNPACK header: truncated (%zu bytes, needs %d)", size,
                        LY_XNN_HEADER_LENGTH);
        uint16_t hl = fb_ld16(blob + 8);
        uint32_t fo = fb_ld32(blob + 10), fs = fb_ld32(blob + 14), co = fb_ld32(blob + 18);
        uint64_t cs = fb_ld64(blob + 22);
        if (hl < LY_XNN_HEADER_LENGTH)
            return xerr(what, "XNNPACK header: length %u is too small (expected %d)", hl,
                        LY_XNN_HEADER_LENGTH);
        if (fo < hl || !ly_pte_range_within(fo, fs, size))
            return xerr(what,
                        "XNNPACK header: flatbuffer of %u bytes at offset %u lies outside the "
                        "%zu-byte payload",
                        fs, fo, size);
        if (fs < 8) return xerr(what, "XNNPACK header: flatbuffer_size %u is too small", fs);
        if (co < hl || !ly_pte_range_within(co, cs, size))
            return xerr(what,
                        "XNNPACK header: constant data of %llu bytes at offset %u lies outside "
                        "the %zu-byte payload",
                        (unsigned long long)cs, co, size);
        fbp = blob + fo;
        fbsize = fs;
        area.data = blob + co;
        area.size = (size_t)cs;
    }
    if (fbsize < 8) return xerr(what, "XNNGraph: %zu bytes is too small for a flatbuffer", fbsize);
    if (memcmp(fbp + 4, "XN00", 4) != 0 && memcmp(fbp + 4, "XN01", 4) != 0) {
        char id[5];
        for (int i = 0; i < 4; i++)
            id[i] = (fbp[4 + i] >= 0x20 && fbp[4 + i] < 0x7f) ? (char)fbp[4 + i] : '?';
        id[4] = '\0';
        return xerr(what, "XNNGraph: identifier \"%s\", expected \"XN00\" or \"XN01\"", id);
    }

    ly_arena *arena = ly_arena_new();
    ly_xnn_graph *g = arena ? ly_arena_alloc(arena, sizeof *g) : NULL;
    if (!g) {
        ly_arena_free(arena);
        return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", what);
    }
    g->internal_ = arena;
    g->has_header = has_header;
    memcpy(g->identifier, fbp + 4, 4);
    g->constant_area = area;

    dec d;
    fb_reader_init(&d.r, fbp, fbsize, what);
    d.arena = arena;
    d.oom = false;
    fb_table root;
    bool ok =
        fb_root(&d.r, &root) && fb_str(&d.r, &root, GRAPH_VERSION, "version", &g->version, NULL) &&
        READ_TABLES(&d, &root, GRAPH_XNODES, "xnodes", g->xnodes, g->n_xnodes, dec_node) &&
        READ_TABLES(&d, &root, GRAPH_XVALUES, "xvalues", g->xvalues, g->n_xvalues, dec_value) &&
        fb_u32(&d.r, &root, GRAPH_NUM_EXTERNS, "num_externs", 0, &g->num_externs) &&
        READ_VEC(&d, &root, GRAPH_INPUT_IDS, "input_ids", g->input_ids, g->n_input_ids) &&
        READ_VEC(&d, &root, GRAPH_OUTPUT_IDS, "output_ids", g->output_ids, g->n_output_ids) &&
        READ_TABLES(&d, &root, GRAPH_CONSTANT_DATA, "constant_data", g->constant_data,
                    g->n_constant_data, dec_constant);
    ly_status st = ok ? validate_graph(g, what) : dec_error(&d);
    if (st != LY_OK) {
        ly_arena_free(arena);
        return st;
    }
    *out = g;
    return LY_OK;
}

void ly_xnn_graph_free(ly_xnn_graph *g)
{
    if (g) ly_arena_free(g->internal_); /* g lives in its arena */
}
