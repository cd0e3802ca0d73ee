/* SPDX-License-Identifier: MIT */
/* D-FINE's transformer head as graph nodes: query selection, the decoder
 * loop with FDR boxes and LQE (dfine.h; detr.md 4.1-4.7, LibreYOLO's
 * models/deim/decoder.py and fdr.py). */
#include "models/dfine/dfine.h"

#include "core/core.h"
#include "models/common/fold.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MLP at prefix + `name`: `layers` linears, the activation between them
 * (ReLU in the linear's epilogue: exact there too, and no pass of its own). */
ly_graph_value ly_dfine_mlp(ly_builder *b, const char *name, ly_graph_value x, int layers,
                            const int64_t *dims, ly_op act)
{
    char key[2 * LY_KEY_MAX];
    for (int i = 0; i < layers; i++) {
        snprintf(key, sizeof key, "%.100s.layers.%d", name, i);
        bool inner = i + 1 < layers, fused = inner && act == LY_OP_RELU;
        x = ly_build_linear_fused(b, key, x, dims[i + 1], dims[i],
                                  fused ? LY_ACT_RELU : LY_ACT_NONE, LY_GRAPH_NONE);
        if (inner && !fused) x = ly_build_node(b, act, key, 1, &x, NULL);
    }
    return x;
}

static ly_graph_value clamp(ly_builder *b, const char *what, ly_graph_value x, double lo, double hi)
{
    ly_clamp_params p = {.min = lo, .max = hi};
    return ly_build_node(b, LY_OP_CLAMP, what, 1, &x, &p);
}

/* inverse_sigmoid(x, eps 1e-5): log(clip(x, eps) / clip(1 - x, eps)) of x in [0, 1]. */
ly_graph_value ly_dfine_inverse_sigmoid(ly_builder *b, ly_graph_value x)
{
    x = clamp(b, "inverse_sigmoid", x, 0.0, 1.0);
    ly_graph_value num = clamp(b, "inverse_sigmoid", x, 1e-5, HUGE_VAL);
    ly_graph_value den =
        ly_build_binary(b, LY_OP_SUB, "inverse_sigmoid", ly_build_scalar(b, 1.0f), x);
    den = clamp(b, "inverse_sigmoid", den, 1e-5, HUGE_VAL);
    ly_graph_value q = ly_build_binary(b, LY_OP_DIV, "inverse_sigmoid", num, den);
    return ly_build_node(b, LY_OP_LOG, "inverse_sigmoid", 1, &q, NULL);
}

/* Integral: softmax over the reg_max + 1 bins of each side, dotted with W. */
static ly_graph_value integral(ly_builder *b, ly_graph_value corners, ly_graph_value project,
                               ly_graph_value zero, int64_t q, int64_t bins)
{
    int64_t sides[4] = {LY_RESHAPE_KEEP, q, 4, bins}, boxes[3] = {LY_RESHAPE_KEEP, q, 4};
    ly_axis_params last = {.axis = -1};
    ly_graph_value p = ly_build_reshape(b, "integral", corners, 4, sides);
    p = ly_build_node(b, LY_OP_SOFTMAX, "integral", 1, &p, &last);
    ly_graph_value in[3] = {p, project, zero};
    return ly_build_reshape(b, "integral", ly_build_node(b, LY_OP_LINEAR, "integral", 3, in, NULL),
                            3, boxes);
}

/* distance2bbox(points cxcywh, distance ltrb, s) -> cxcywh, in torch's order:
 * x1 = cx - (0.5 s + l) * (w / s), ..., then ((x1 + x2) / 2, x2 - x1). */
static ly_graph_value distance2bbox(ly_builder *b, ly_graph_value points, ly_graph_value distance,
                                    float reg_scale)
{
    ly_graph_value centre = ly_build_slice(b, "distance2bbox", points, 2, 0, 2);
    ly_graph_value size = ly_build_slice(b, "distance2bbox", points, 2, 2, 2);
    ly_graph_value unit =
        ly_build_binary(b, LY_OP_DIV, "distance2bbox", size, ly_build_scalar(b, reg_scale));
    ly_graph_value half = ly_build_scalar(b, 0.5f * reg_scale);
    ly_graph_value lt = ly_build_binary(b, LY_OP_ADD, "distance2bbox", half,
                                        ly_build_slice(b, "distance2bbox", distance, 2, 0, 2));
    ly_graph_value rb = ly_build_binary(b, LY_OP_ADD, "distance2bbox", half,
                                        ly_build_slice(b, "distance2bbox", distance, 2, 2, 2));
    ly_graph_value p1 = ly_build_binary(b, LY_OP_SUB, "distance2bbox", centre,
                                        ly_build_binary(b, LY_OP_MUL, "distance2bbox", lt, unit));
    ly_graph_value p2 = ly_build_binary(b, LY_OP_ADD, "distance2bbox", centre,
                                        ly_build_binary(b, LY_OP_MUL, "distance2bbox", rb, unit));
    ly_graph_value c = ly_build_binary(b, LY_OP_DIV, "distance2bbox",
                                       ly_build_binary(b, LY_OP_ADD, "distance2bbox", p1, p2),
                                       ly_build_scalar(b, 2.0f));
    ly_graph_value wh = ly_build_binary(b, LY_OP_SUB, "distance2bbox", p2, p1);
    ly_graph_value both[2] = {c, wh}, out = LY_GRAPH_NONE;
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_concat(b->g, "distance2bbox", 2, both, 2, &out));
    return out;
}

/* LQE: softmax per side, its top 4 and their mean (20 features), an MLP to
 * one score added to every class logit. */
static ly_graph_value lqe(ly_builder *b, const char *name, ly_graph_value scores,
                          ly_graph_value corners, int64_t q, int64_t bins, ly_op act)
{
    int64_t sides[4] = {LY_RESHAPE_KEEP, q, 4, bins}, flat[3] = {LY_RESHAPE_KEEP, q, 20};
    ly_axis_params last = {.axis = -1};
    ly_graph_value p = ly_build_reshape(b, "lqe", corners, 4, sides);
    p = ly_build_node(b, LY_OP_SOFTMAX, "lqe", 1, &p, &last);
    ly_topk_params tp = LY_TOPK_DEFAULTS;
    tp.k = 4;
    ly_graph_value top[2] = {LY_GRAPH_NONE, LY_GRAPH_NONE};
    if (b->st == LY_OK)
        ly_build_fail(b, ly_graph_node(b->g, LY_OP_TOPK, "lqe.topk", 1, &p, &tp, 2, top));
    static const float quarter[4] = {0.25f, 0.25f, 0.25f, 0.25f}, nothing = 0.0f;
    int64_t wshape[2] = {1, 4}, one = 1;
    ly_graph_value in[3] = {top[0], ly_build_constant(b, 2, wshape, quarter),
                            ly_build_constant(b, 1, &one, &nothing)};
    ly_graph_value mean = ly_build_node(b, LY_OP_LINEAR, "lqe.mean", 3, in, NULL);
    ly_graph_value both[2] = {top[0], mean}, stat = LY_GRAPH_NONE;
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_concat(b->g, "lqe.stat", 2, both, 3, &stat));
    stat = ly_build_reshape(b, "lqe", stat, 3, flat);
    static const int64_t dims[3] = {20, 64, 1};
    char key[2 * LY_KEY_MAX];
    snprintf(key, sizeof key, "%.100s.reg_conf", name);
    return ly_build_binary(b, LY_OP_ADD, "lqe", scores, ly_dfine_mlp(b, key, stat, 2, dims, act));
}

/* W(n) of weighting_function(reg_max, up, reg_scale), in float as torch computes it. */
static void weighting(float up, float reg_scale, int64_t reg_max, float *w)
{
    float upper1 = fabsf(up) * fabsf(reg_scale), upper2 = upper1 * 2.0f;
    float step = powf(upper1 + 1.0f, (float)(2.0 / (double)(reg_max - 2)));
    int64_t half = reg_max / 2, at = 0;
    w[at++] = -upper2;
    for (int64_t i = half - 1; i > 0; i--)
        w[at++] = -powf(step, (float)i) + 1.0f;
    w[at++] = 0.0f;
    for (int64_t i = 1; i < half; i++)
        w[at++] = powf(step, (float)i) - 1.0f;
    w[at++] = upper2;
}

/* A one-element key as a float: up and reg_scale are f32, or i64 where the
 * config gave an integer (DEIMv2-n's reg_scale 4). */
static bool scalar_key(ly_builder *b, const char *suffix, float *out)
{
    char key[LY_KEY_MAX];
    ly_build_key(b, suffix, key);
    ly_tensor v;
    if (b->st == LY_OK && ly_build_find(b, suffix, &v) && ly_tensor_numel(&v) == 1 &&
        (v.dtype == LY_F32 || v.dtype == LY_I64)) {
        *out = v.dtype == LY_F32 ? *(const float *)v.data : (float)*(const int64_t *)v.data;
        return true;
    }
    if (b->st == LY_OK)
        ly_build_problem(b, LY_PROBLEM_MISSING, "key '%s' missing or not one f32 or i64 value",
                         key);
    return false;
}

/* MLP at prefix + `name` with its widths read from the keys (layers.<i>.weight). */
static ly_graph_value mlp_from_keys(ly_builder *b, const char *name, ly_graph_value x,
                                    int64_t in_width, ly_op act)
{
    int64_t dims[8] = {in_width};
    int layers = 0;
    char key[2 * LY_KEY_MAX];
    for (; layers < 7; layers++) {
        snprintf(key, sizeof key, "%.100s.layers.%d.weight", name, layers);
        int64_t n = ly_build_extent(b, key, 0);
        if (n <= 0) break;
        dims[layers + 1] = n;
    }
    if (layers == 0 && b->st == LY_OK)
        ly_build_fail(b, ly_set_error(LY_E_FORMAT, "%s: missing key '%s%.100s.layers.0.weight'",
                                      b->what, b->prefix, name));
    return ly_dfine_mlp(b, name, x, layers, dims, act);
}

/* The decoder's input_proj of level l: 1x1 conv + BN where the encoder's
 * width is not the decoder's (D-FINE x), Identity otherwise. */
ly_graph_value ly_dfine_input_proj(ly_builder *b, int l, ly_graph_value map, int64_t hidden,
                                   const int64_t shape[2])
{
    char name[LY_KEY_MAX], key[LY_KEY_MAX];
    snprintf(name, sizeof name, "input_proj.%d", l);
    snprintf(key, sizeof key, "input_proj.%d.conv.weight", l);
    int64_t cin = ly_build_extent(b, key, 1);
    if (cin <= 0) return map;
    ly_fmap x = {map, cin, shape[0], shape[1]};
    return ly_build_conv_norm(b, name, "norm", x, hidden, 1, 1, false, LY_ACT_NONE, NULL).v;
}

ly_graph_value ly_dfine_memory(ly_builder *b, int levels, const ly_graph_value *maps,
                               const int64_t (*shapes)[2], int64_t hidden)
{
    ly_graph_value flat[4] = {LY_GRAPH_NONE, LY_GRAPH_NONE, LY_GRAPH_NONE, LY_GRAPH_NONE};
    static const int64_t to_tokens[3] = {0, 2, 1};
    for (int l = 0; l < levels && l < 4; l++) {
        int64_t shape[3] = {LY_RESHAPE_KEEP, hidden, shapes[l][0] * shapes[l][1]};
        ly_graph_value m = ly_dfine_input_proj(b, l, maps[l], hidden, shapes[l]);
        flat[l] =
            ly_build_permute(b, "memory", ly_build_reshape(b, "memory", m, 3, shape), 3, to_tokens);
    }
    ly_graph_value memory = flat[0];
    char name[LY_KEY_MAX];
    snprintf(name, sizeof name, "%.100smemory", b->prefix);
    if (levels > 1 && b->st == LY_OK)
        ly_build_fail(b, ly_graph_concat(b->g, name, levels, flat, 1, &memory));
    return memory;
}

void ly_dfine_stored_anchors(ly_builder *b, int64_t tokens, ly_graph_value *anchors,
                             ly_graph_value *valid)
{
    int64_t ashape[3] = {1, tokens, 4}, mshape[3] = {1, tokens, 1};
    *anchors = ly_build_weight(b, "anchors", 3, ashape);
    *valid = LY_GRAPH_NONE;
    ly_tensor mask_view;
    float *mask = calloc((size_t)tokens, sizeof *mask);
    if (!mask) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
        return;
    }
    bool have_mask = b->st == LY_OK && ly_build_find(b, "valid_mask", &mask_view) &&
                     ly_tensor_numel(&mask_view) == tokens;
    if (b->st == LY_OK && !have_mask)
        ly_build_problem(b, LY_PROBLEM_MISSING, "key '%svalid_mask' missing or not [1, %lld, 1]",
                         b->prefix, (long long)tokens);
    for (int64_t i = 0; have_mask && i < tokens; i++)
        mask[i] = mask_view.dtype == LY_F32   ? (((const float *)mask_view.data)[i] != 0.0f)
                  : mask_view.dtype == LY_I64 ? (((const int64_t *)mask_view.data)[i] != 0)
                                              : (((const uint8_t *)mask_view.data)[i] != 0);
    *valid = ly_build_constant(b, 3, mshape, mask);
    free(mask);
}

void ly_dfine_select_queries(ly_builder *b, ly_graph_value out_memory, ly_graph_value anchors,
                             int64_t tokens, int64_t hidden, int64_t classes, int queries,
                             ly_op act, ly_graph_value *target, ly_graph_value *ref_unact,
                             ly_graph_value *selected)
{
    char name[LY_KEY_MAX];
    ly_graph_value enc_logits = ly_build_linear(b, "enc_score_head", out_memory, classes, hidden);
    ly_topk_params best = LY_TOPK_DEFAULTS;
    best.k = 1;
    ly_graph_value top1[2] = {LY_GRAPH_NONE, LY_GRAPH_NONE};
    snprintf(name, sizeof name, "%.100senc.max", b->prefix);
    if (b->st == LY_OK)
        ly_build_fail(b, ly_graph_node(b->g, LY_OP_TOPK, name, 1, &enc_logits, &best, 2, top1));
    int64_t per_token[2] = {LY_RESHAPE_KEEP, tokens};
    ly_graph_value score = ly_build_reshape(b, "enc.max", top1[0], 2, per_token);
    ly_topk_params select = LY_TOPK_DEFAULTS;
    select.k = queries;
    ly_graph_value chosen[2] = {LY_GRAPH_NONE, LY_GRAPH_NONE};
    snprintf(name, sizeof name, "%.100senc.topk", b->prefix);
    if (b->st == LY_OK)
        ly_build_fail(b, ly_graph_node(b->g, LY_OP_TOPK, name, 1, &score, &select, 2, chosen));
    int64_t all = -1; /* the batch's runs of `queries` rows, image after image */
    ly_graph_value index = ly_build_reshape(b, "enc.topk_ind", chosen[1], 1, &all);
    if (selected) *selected = index;
    ly_gather_params rows = {.axis = 1, .per_image = queries};
    ly_graph_value in2[2] = {out_memory, index};
    *target = ly_build_node(b, LY_OP_INDEX_SELECT, "enc.topk_memory", 2, in2, &rows);
    ly_graph_value in3[2] = {anchors, index};
    ly_graph_value topk_anchors =
        ly_build_node(b, LY_OP_INDEX_SELECT, "enc.topk_anchors", 2, in3, &rows);
    int64_t box_mlp[4] = {hidden, hidden, hidden, 4};
    *ref_unact =
        ly_build_binary(b, LY_OP_ADD, "enc.ref_unact",
                        ly_dfine_mlp(b, "enc_bbox_head", *target, 3, box_mlp, act), topk_anchors);
}

ly_status ly_dfine_head(ly_graph *g, const ly_checkpoint *ck, int levels,
                        const ly_graph_value *maps, const int64_t (*shapes)[2],
                        const ly_dfine_head_config *cfg, ly_graph_value *logits,
                        ly_graph_value *boxes)
{
    ly_builder b = {.g = g, .ck = ck, .what = "D-FINE head", .prefix = "decoder.", .st = LY_OK};
    ly_op act = cfg->silu ? LY_OP_SILU : LY_OP_RELU;
    int queries = cfg->queries, heads = cfg->heads;
    int64_t hidden = ly_build_extent(&b, "enc_score_head.weight", 1), tokens = 0;
    int64_t classes = ly_build_extent(&b, "enc_score_head.weight", 0);
    int64_t corner_rows = ly_build_extent(&b, "dec_bbox_head.0.layers.2.weight", 0),
            bins = corner_rows / 4;
    if (hidden <= 0 || classes <= 0)
        return ly_set_error(LY_E_FORMAT, "D-FINE head: key 'decoder.enc_score_head.weight' "
                                         "missing or not [classes, C]");
    if (corner_rows <= 0 || corner_rows % 4)
        return ly_set_error(LY_E_FORMAT, "D-FINE head: key "
                                         "'decoder.dec_bbox_head.0.layers.2.weight' missing "
                                         "or not [4 (reg_max + 1), C]");
    int layers = 0;
    for (;; layers++) {
        char key[LY_KEY_MAX];
        snprintf(key, sizeof key, "decoder.layers.%d.self_attn.in_proj_weight", layers);
        if (ly_build_extent(&b, key, 0) < 0) break;
    }
    if (layers == 0 || levels < 1 || levels > 4 || bins < 4)
        return ly_set_error(LY_E_FORMAT,
                            "D-FINE head: no decoder layers (decoder.decoder.layers.*)");
    for (int l = 0; l < levels; l++)
        tokens += shapes[l][0] * shapes[l][1];

    ly_graph_value memory = ly_dfine_memory(&b, levels, maps, shapes, hidden);

    /* the anchors and valid mask buffers, as stored */
    ly_graph_value anchors, valid;
    ly_dfine_stored_anchors(&b, tokens, &anchors, &valid);

    /* query selection; DEIMv2 has no enc_output (the masked memory itself) */
    ly_graph_value out_memory = ly_build_binary(&b, LY_OP_MUL, "enc.mask", memory, valid);
    if (ly_build_extent(&b, "enc_output.proj.weight", 0) > 0)
        out_memory = ly_build_layer_norm(
            &b, "enc_output.norm",
            ly_build_linear(&b, "enc_output.proj", out_memory, hidden, hidden), hidden, 1e-5);
    ly_graph_value target, ref_unact;
    ly_dfine_select_queries(&b, out_memory, anchors, tokens, hidden, classes, queries, act, &target,
                            &ref_unact, NULL);
    int64_t q = queries, box_mlp[4] = {hidden, hidden, hidden, 4};

    /* FDR: W(n) and the box scale (a .safetensors keeps only the decoder.decoder aliases) */
    float up = 0, reg_scale = 0;
    bool outer = ly_build_extent(&b, "up", 0) > 0;
    scalar_key(&b, outer ? "up" : "decoder.up", &up);
    scalar_key(&b, outer ? "reg_scale" : "decoder.reg_scale", &reg_scale);
    float *w = calloc((size_t)bins, sizeof *w);
    if (!w) return ly_set_error(LY_E_NO_MEMORY, "D-FINE head: out of memory");
    weighting(up, reg_scale, bins - 1, w);
    int64_t pshape[2] = {1, bins}, one = 1;
    float nothing = 0.0f;
    ly_graph_value project = ly_build_constant(&b, 2, pshape, w);
    ly_graph_value zero = ly_build_constant(&b, 1, &one, &nothing);
    free(w);

    int64_t ss_shape[2] = {levels, 2};
    ly_graph_value spatial = LY_GRAPH_NONE;
    void *ss = NULL;
    if (b.st == LY_OK) ly_build_fail(&b, ly_graph_constant(g, LY_I64, 2, ss_shape, &spatial, &ss));
    if (b.st == LY_OK) memcpy(ss, shapes, (size_t)levels * 2 * sizeof(int64_t));

    /* the decoder loop, to the last layer (eval_idx -1) */
    ly_graph_value ref = ly_build_node(&b, LY_OP_SIGMOID, "ref", 1, &ref_unact, NULL);
    ly_graph_value prev_out = LY_GRAPH_NONE, prev_corners = LY_GRAPH_NONE, initial = LY_GRAPH_NONE;
    ly_graph_value pos = LY_GRAPH_NONE;
    int64_t corner_mlp[4] = {hidden, hidden, hidden, 4 * bins};
    int64_t ref4[4] = {LY_RESHAPE_KEEP, q, 1, 4};
    for (int i = 0; i < layers && b.st == LY_OK; i++) {
        char key[LY_KEY_MAX];
        if (i == 0 || !cfg->query_pos_once)
            pos = clamp(&b, "query_pos", mlp_from_keys(&b, "query_pos_head", ref, 4, act), -10.0,
                        10.0);
        ly_dfine_layer_inputs in = {.target = target,
                                    .reference = ly_build_reshape(&b, "ref", ref, 4, ref4),
                                    .query_pos = pos,
                                    .memory = memory,
                                    .spatial_shapes = spatial};
        ly_graph_value out = LY_GRAPH_NONE;
        if (b.st == LY_OK)
            ly_build_fail(&b,
                          ly_dfine_decoder_layer(g, ck, i, heads, cfg->silu, levels, &in, &out));
        if (i == 0) {
            ly_graph_value pre = ly_dfine_mlp(&b, "pre_bbox_head", out, 3, box_mlp, act);
            pre =
                ly_build_binary(&b, LY_OP_ADD, "pre_bbox", pre, ly_dfine_inverse_sigmoid(&b, ref));
            initial = ly_build_node(&b, LY_OP_SIGMOID, "pre_bbox", 1, &pre, NULL);
        }
        /* a shared head saved once (safetensors drops the aliases) reads layer 0's */
        snprintf(key, sizeof key, "dec_bbox_head.%d.layers.0.weight", i);
        int head = cfg->shared_box_head && ly_build_extent(&b, key, 0) < 0 ? 0 : i;
        snprintf(key, sizeof key, "dec_bbox_head.%d", head);
        ly_graph_value head_in = i ? ly_build_binary(&b, LY_OP_ADD, key, out, prev_out) : out;
        ly_graph_value corners = ly_dfine_mlp(&b, key, head_in, 3, corner_mlp, act);
        if (i) corners = ly_build_binary(&b, LY_OP_ADD, key, corners, prev_corners);
        ly_graph_value box = distance2bbox(
            &b, initial, integral(&b, corners, project, zero, q, bins), fabsf(reg_scale));
        snprintf(key, sizeof key, "dec_score_head.%d", i);
        if (i + 1 == layers) {
            ly_graph_value s = ly_build_linear(&b, key, out, classes, hidden);
            snprintf(key, sizeof key, "decoder.lqe_layers.%d", i);
            *logits = lqe(&b, key, s, corners, q, bins, act);
            *boxes = box;
        } else {
            /* the model has them (a strict load wants them); the eval layer's are read */
            ly_build_expect_linear(&b, key, classes, hidden);
            snprintf(key, sizeof key, "decoder.lqe_layers.%d.reg_conf.layers.0", i);
            ly_build_expect_linear(&b, key, 64, 20);
            snprintf(key, sizeof key, "decoder.lqe_layers.%d.reg_conf.layers.1", i);
            ly_build_expect_linear(&b, key, 1, 64);
        }
        ref = box;
        prev_out = out;
        prev_corners = corners;
        target = out;
    }
    return b.st;
}
