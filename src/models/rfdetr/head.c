/* SPDX-License-Identifier: MIT */
/* RF-DETR's transformer and heads as graph nodes (rfdetr.h; rfdetr.md 6-9;
 * LibreYOLO's models/rfdetr/transformer.py and lwdetr.py). */
#include "models/rfdetr/rfdetr.h"

#include "core/core.h"
#include "models/common/builder.h"
#include "models/dfine/dfine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HIDDEN = 256, SELF_HEADS = 8, CROSS_HEADS = 16, SINE = 128 };

/* bbox_reparam: (cx, cy) = delta_xy * ref_wh + ref_xy, (w, h) =
 * exp(delta_wh) * ref_wh, on [.., 4] values. */
static ly_graph_value reparam(ly_builder *b, const char *what, ly_graph_value delta,
                              ly_graph_value ref, int axis)
{
    ly_graph_value ref_xy = ly_build_slice(b, what, ref, axis, 0, 2);
    ly_graph_value ref_wh = ly_build_slice(b, what, ref, axis, 2, 2);
    ly_graph_value xy = ly_build_binary(
        b, LY_OP_ADD, what,
        ly_build_binary(b, LY_OP_MUL, what, ly_build_slice(b, what, delta, axis, 0, 2), ref_wh),
        ref_xy);
    ly_graph_value wh = ly_build_binary(
        b, LY_OP_MUL, what,
        ly_build_unary(b, LY_OP_EXP, what, ly_build_slice(b, what, delta, axis, 2, 2)), ref_wh);
    ly_graph_value both[2] = {xy, wh};
    return ly_build_concat(b, what, 2, both, axis);
}

/* gen_sineembed_for_position of boxes [1, q, 4]: per coordinate, in the
 * order y, x, w, h, angles v * 2pi / 10000^(2 floor(i/2) / 128) for i < 128,
 * sine at even i and cosine at odd i: [1, q, 512]. Columns 2k and 2k + 1 share
 * their angle, so each of the 64 angles gets its sine and its cosine side by
 * side, as the reference's stack does (half the sines and cosines of taking
 * both over all 128 columns and masking). */
static ly_graph_value sine_embedding(ly_builder *b, ly_graph_value boxes, int64_t q)
{
    int64_t four = 4, order_data[4] = {1, 0, 2, 3};
    ly_graph_value order = LY_GRAPH_NONE;
    void *data = NULL;
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_constant(b->g, LY_I64, 1, &four, &order, &data));
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    memcpy(data, order_data, sizeof order_data);
    ly_gather_params last = {.axis = 2};
    ly_graph_value in[2] = {boxes, order};
    ly_graph_value v = ly_build_node(b, LY_OP_INDEX_SELECT, "sine.yxwh", 2, in, &last);
    int64_t column[4] = {1, q, 4, 1};
    v = ly_build_reshape(b, "sine.yxwh", v, 4, column);
    v = ly_build_binary(b, LY_OP_MUL, "sine.scale", v, ly_build_scalar(b, (float)(2.0 * M_PI)));
    enum { ANGLES = SINE / 2 };
    float dim_t[ANGLES];
    for (int k = 0; k < ANGLES; k++)
        dim_t[k] = (float)pow(10000.0, (double)(2 * k) / SINE);
    int64_t row = ANGLES, pairs[5] = {1, q, 4, ANGLES, 1}, flat[3] = {1, q, 4 * SINE};
    v = ly_build_binary(b, LY_OP_DIV, "sine.angle", v, ly_build_constant(b, 1, &row, dim_t));
    v = ly_build_reshape(b, "sine.angle", v, 5, pairs);
    ly_graph_value both[2] = {ly_build_unary(b, LY_OP_SIN, "sine.sin", v),
                              ly_build_unary(b, LY_OP_COS, "sine.cos", v)};
    return ly_build_reshape(b, "sine", ly_build_concat(b, "sine", 2, both, 4), 3, flat);
}

/* The first `rows` rows of the [total, width] table at prefix + key (the
 * other Group-DETR groups' rows are training-only), as [1, rows, width]. */
static ly_graph_value group0_rows(ly_builder *b, const char *key, int64_t rows, int64_t width)
{
    int64_t total = ly_build_extent(b, key, 0);
    if (b->st == LY_OK && total < rows) {
        char full[LY_KEY_MAX];
        ly_build_key(b, key, full);
        ly_build_fail(b, ly_set_error(LY_E_FORMAT,
                                      "RF-DETR: key '%s' has %lld rows, expected at least %lld "
                                      "(the queries)",
                                      full, (long long)total, (long long)rows));
        return LY_GRAPH_NONE;
    }
    int64_t shape[2] = {total, width}, kept[3] = {1, rows, width};
    const float *all = ly_build_take(b, key, 2, shape);
    return ly_build_constant(b, 3, kept, all);
}

/* gen_encoder_output_proposals for one grid x grid level with bbox_reparam:
 * ((x + 0.5) / grid, (y + 0.5) / grid, 0.05, 0.05), 0 where a value is
 * outside (0.01, 0.99); *valid: 1 or 0 per token ([1, tokens, 1]). */
static ly_graph_value proposals(ly_builder *b, int64_t grid, ly_graph_value *valid, bool *all_valid)
{
    int64_t tokens = grid * grid;
    float *p = malloc((size_t)tokens * 4 * sizeof *p), *ok = malloc((size_t)tokens * sizeof *ok);
    ly_graph_value out = LY_GRAPH_NONE;
    *valid = LY_GRAPH_NONE;
    *all_valid = true;
    if (!p || !ok) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "RF-DETR: out of memory"));
    } else {
        for (int64_t y = 0; y < grid; y++)
            for (int64_t x = 0; x < grid; x++) {
                int64_t t = y * grid + x;
                float v[4] = {((float)x + 0.5f) / (float)grid, ((float)y + 0.5f) / (float)grid,
                              0.05f, 0.05f};
                bool in = true;
                for (int k = 0; k < 4; k++)
                    in = in && v[k] > 0.01f && v[k] < 0.99f;
                for (int k = 0; k < 4; k++)
                    p[t * 4 + k] = in ? v[k] : 0.0f;
                ok[t] = in ? 1.0f : 0.0f;
                *all_valid = *all_valid && in;
            }
        int64_t shape[3] = {1, tokens, 4}, mask[3] = {1, tokens, 1};
        out = ly_build_constant(b, 3, shape, p);
        *valid = ly_build_constant(b, 3, mask, ok);
    }
    free(p);
    free(ok);
    return out;
}

ly_status ly_rfdetr_head(ly_graph *g, const ly_checkpoint *ck, ly_graph_value map, int64_t grid,
                         int queries, int layers, ly_graph_value *logits, ly_graph_value *boxes,
                         ly_graph_value *selected)
{
    if (!g || !ck || !logits || !boxes || grid <= 0 || queries < 1 || layers < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_rfdetr_head: bad argument");
    ly_builder b = {.g = g, .ck = ck, .what = "RF-DETR transformer", .st = LY_OK};
    int64_t c = HIDDEN, tokens = grid * grid, q = queries;
    int64_t columns = ly_build_extent(&b, "class_embed.bias", 0);
    if (columns < 1)
        return ly_set_error(LY_E_FORMAT,
                            "RF-DETR: key 'class_embed.bias' missing or not [classes]");

    /* memory: the map flattened h-major */
    int64_t flat[3] = {1, c, tokens}, to_tokens[3] = {0, 2, 1};
    ly_graph_value memory =
        ly_build_permute(&b, "memory", ly_build_reshape(&b, "memory", map, 3, flat), 3, to_tokens);
    ly_graph_value valid;
    bool all_valid;
    ly_graph_value props = proposals(&b, grid, &valid, &all_valid);
    if (!all_valid) memory = ly_build_binary(&b, LY_OP_MUL, "memory.valid", memory, valid);

    /* group 0's two-stage heads, the top `queries` tokens by their best column */
    snprintf(b.prefix, sizeof b.prefix, "transformer.");
    ly_graph_value out_memory = ly_build_layer_norm(
        &b, "enc_output_norm.0", ly_build_linear(&b, "enc_output.0", memory, c, c), c, 1e-5);
    ly_graph_value enc_logits =
        ly_build_linear(&b, "enc_out_class_embed.0", out_memory, columns, c);
    int64_t box_mlp[4] = {c, c, c, 4};
    for (int grp = 1;; grp++) { /* the other groups' heads: training only */
        char key[64];
        snprintf(key, sizeof key, "enc_output.%d.weight", grp);
        if (ly_build_extent(&b, key, 0) < 0) break;
        snprintf(key, sizeof key, "enc_output.%d", grp);
        ly_build_expect_linear(&b, key, c, c);
        int64_t norm = c;
        snprintf(key, sizeof key, "enc_output_norm.%d.weight", grp);
        ly_build_expect(&b, key, 1, &norm);
        snprintf(key, sizeof key, "enc_output_norm.%d.bias", grp);
        ly_build_expect(&b, key, 1, &norm);
        snprintf(key, sizeof key, "enc_out_class_embed.%d", grp);
        ly_build_expect_linear(&b, key, columns, c);
        for (int i = 0; i < 3; i++) {
            snprintf(key, sizeof key, "enc_out_bbox_embed.%d.layers.%d", grp, i);
            ly_build_expect_linear(&b, key, box_mlp[i + 1], box_mlp[i]);
        }
    }
    ly_topk_params best = LY_TOPK_DEFAULTS;
    best.k = 1;
    ly_graph_value top1[2] = {LY_GRAPH_NONE, LY_GRAPH_NONE};
    if (b.st == LY_OK)
        ly_build_fail(&b, ly_graph_node(g, LY_OP_TOPK, "transformer.enc.max", 1, &enc_logits, &best,
                                        2, top1));
    int64_t per_token[2] = {1, tokens};
    ly_graph_value score = ly_build_reshape(&b, "enc.max", top1[0], 2, per_token);
    ly_topk_params select = LY_TOPK_DEFAULTS;
    select.k = q < tokens ? q : tokens;
    ly_graph_value chosen[2] = {LY_GRAPH_NONE, LY_GRAPH_NONE};
    if (b.st == LY_OK)
        ly_build_fail(&b, ly_graph_node(g, LY_OP_TOPK, "transformer.enc.topk", 1, &score, &select,
                                        2, chosen));
    q = select.k;
    ly_graph_value index = ly_build_reshape(&b, "enc.topk_ind", chosen[1], 1, &q);
    if (selected) *selected = index;
    /* The box head only on the chosen tokens: its rows are independent, and
     * LibreYOLO gathers its output for these tokens alone (about half of 576
     * at 384 pixels: a third of a millisecond at one thread). */
    ly_gather_params rows = {.axis = 1};
    ly_graph_value chosen_memory[2] = {out_memory, index}, chosen_props[2] = {props, index};
    ly_graph_value ref_ts = reparam(
        &b, "enc.coord",
        ly_dfine_mlp(
            &b, "enc_out_bbox_embed.0",
            ly_build_node(&b, LY_OP_INDEX_SELECT, "enc.topk_memory", 2, chosen_memory, &rows), 3,
            box_mlp, LY_OP_RELU),
        ly_build_node(&b, LY_OP_INDEX_SELECT, "enc.topk_proposals", 2, chosen_props, &rows), 2);

    /* the decoder's queries: learned content, reference deltas on the chosen boxes */
    b.prefix[0] = '\0';
    ly_graph_value target = group0_rows(&b, "query_feat.weight", q, c);
    ly_graph_value refs =
        reparam(&b, "refpoints", group0_rows(&b, "refpoint_embed.weight", q, 4), ref_ts, 2);

    /* every layer reads the same references and query position (lite refpoint refine) */
    snprintf(b.prefix, sizeof b.prefix, "transformer.decoder.");
    int64_t pos_mlp[3] = {2 * c, c, c};
    ly_graph_value query_pos =
        ly_dfine_mlp(&b, "ref_point_head", sine_embedding(&b, refs, q), 2, pos_mlp, LY_OP_RELU);
    int64_t ref4[4] = {1, q, 1, 4}, hw_shape[2] = {1, 2}, hw[2] = {grid, grid};
    ly_graph_value spatial = LY_GRAPH_NONE;
    void *hw_data = NULL;
    if (b.st == LY_OK)
        ly_build_fail(&b, ly_graph_constant(g, LY_I64, 2, hw_shape, &spatial, &hw_data));
    if (b.st != LY_OK) return b.st;
    memcpy(hw_data, hw, sizeof hw);
    ly_dfine_layer_inputs in = {.reference = ly_build_reshape(&b, "refpoints", refs, 4, ref4),
                                .query_pos = query_pos,
                                .memory = memory,
                                .spatial_shapes = spatial};
    for (int i = 0; i < layers && b.st == LY_OK; i++) {
        ly_detr_layer_config layer = {.what = "RF-DETR decoder",
                                      .self_heads = SELF_HEADS,
                                      .cross_heads = CROSS_HEADS,
                                      .levels = 1};
        snprintf(layer.prefix, sizeof layer.prefix, "transformer.decoder.layers.%d.", i);
        in.target = target;
        ly_build_fail(&b, ly_detr_decoder_layer(g, ck, &layer, &in, &target));
    }
    ly_graph_value hs = ly_build_layer_norm(&b, "norm", target, c, 1e-5);

    b.prefix[0] = '\0';
    *logits = ly_build_linear(&b, "class_embed", hs, columns, c);
    *boxes =
        reparam(&b, "boxes", ly_dfine_mlp(&b, "bbox_embed", hs, 3, box_mlp, LY_OP_RELU), refs, 2);
    return b.st;
}
