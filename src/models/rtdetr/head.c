/* SPDX-License-Identifier: MIT */
/* RT-DETR's and RT-DETRv2's transformer head as graph nodes (rtdetr.h;
 * rtdetr.md 4, 5): the D-FINE lineage's query selection and decoder layer,
 * with RT-DETR's plain box refinement. */
#include "models/rtdetr/rtdetr.h"

#include "core/core.h"
#include "models/common/builder.h"
#include "models/dfine/dfine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RT-DETR's anchors for the actual level sizes (rtdetr.md 4.2), in float32 as
 * torch computes them: cell centres ((x + 0.5) / W, (y + 0.5) / H), w = h =
 * 0.05 * 2^level, valid where all four lie in (0.01, 0.99), stored as
 * log(a / (1 - a)), +inf where not valid. */
static void computed_anchors(ly_builder *b, int levels, const int64_t (*shapes)[2], int64_t tokens,
                             ly_graph_value *anchors, ly_graph_value *valid)
{
    float *a = malloc((size_t)tokens * 4 * sizeof *a), *m = malloc((size_t)tokens * sizeof *m);
    *anchors = *valid = LY_GRAPH_NONE;
    if (!a || !m) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    } else {
        int64_t at = 0;
        for (int l = 0; l < levels; l++) {
            int64_t h = shapes[l][0], w = shapes[l][1];
            float size = 0.05f * (float)(1 << l);
            for (int64_t y = 0; y < h; y++)
                for (int64_t x = 0; x < w; x++, at++) {
                    float box[4] = {((float)x + 0.5f) / (float)w, ((float)y + 0.5f) / (float)h,
                                    size, size};
                    bool ok = true;
                    for (int k = 0; k < 4; k++)
                        ok = ok && box[k] > 0.01f && box[k] < 0.99f;
                    for (int k = 0; k < 4; k++)
                        a[at * 4 + k] = ok ? logf(box[k] / (1.0f - box[k])) : INFINITY;
                    m[at] = ok ? 1.0f : 0.0f;
                }
        }
        int64_t ashape[3] = {1, tokens, 4}, mshape[3] = {1, tokens, 1};
        *anchors = ly_build_constant(b, 3, ashape, a);
        *valid = ly_build_constant(b, 3, mshape, m);
    }
    free(a);
    free(m);
}

ly_status ly_rtdetr_head(ly_graph *g, const ly_checkpoint *ck, int levels,
                         const ly_graph_value *maps, const int64_t (*shapes)[2],
                         const ly_rtdetr_head_config *cfg, ly_graph_value *logits,
                         ly_graph_value *boxes)
{
    ly_builder b = {.g = g, .ck = ck, .what = "RT-DETR head", .prefix = "decoder.", .st = LY_OK};
    int64_t hidden = ly_build_extent(&b, "enc_score_head.weight", 1);
    int64_t classes = ly_build_extent(&b, "enc_score_head.weight", 0), tokens = 0;
    if (hidden <= 0 || classes <= 0)
        return ly_set_error(LY_E_FORMAT, "RT-DETR head: key 'decoder.enc_score_head.weight' "
                                         "missing or not [classes, C]");
    int layers = 0;
    for (;; layers++) {
        char key[LY_KEY_MAX];
        snprintf(key, sizeof key, "decoder.layers.%d.self_attn.in_proj_weight", layers);
        if (ly_build_extent(&b, key, 0) < 0) break;
    }
    int eval = cfg->eval_idx < 0 ? layers + cfg->eval_idx : cfg->eval_idx;
    if (layers == 0 || eval < 0 || eval >= layers || levels < 1 || levels > 4)
        return ly_set_error(LY_E_FORMAT,
                            "RT-DETR head: %d decoder layers (decoder.decoder.layers.*), the "
                            "outputs of layer %d wanted",
                            layers, cfg->eval_idx);
    for (int l = 0; l < levels; l++)
        tokens += shapes[l][0] * shapes[l][1];

    ly_graph_value memory = ly_dfine_memory(&b, levels, maps, shapes, hidden);

    ly_graph_value anchors, valid;
    if (cfg->v1)
        computed_anchors(&b, levels, shapes, tokens, &anchors, &valid);
    else
        ly_dfine_stored_anchors(&b, tokens, &anchors, &valid);
    /* enc_output: an unnamed Sequential in RT-DETR, proj / norm in v2 */
    const char *proj = cfg->v1 ? "enc_output.0" : "enc_output.proj";
    const char *norm = cfg->v1 ? "enc_output.1" : "enc_output.norm";
    ly_graph_value out_memory = ly_build_binary(&b, LY_OP_MUL, "enc.mask", memory, valid);
    out_memory = ly_build_layer_norm(
        &b, norm, ly_build_linear(&b, proj, out_memory, hidden, hidden), hidden, 1e-5);
    ly_graph_value target, ref_unact;
    ly_dfine_select_queries(&b, out_memory, anchors, tokens, hidden, classes, cfg->queries,
                            LY_OP_RELU, &target, &ref_unact, cfg->selected);
    /* training's denoising embedding: [classes + 1, C], unread */
    int64_t embed[2] = {classes + 1, hidden};
    ly_build_expect(&b, "denoising_class_embed.weight", 2, embed);

    int64_t ss_shape[2] = {levels, 2};
    ly_graph_value spatial = LY_GRAPH_NONE;
    void *ss = NULL;
    if (b.st == LY_OK) ly_build_fail(&b, ly_graph_constant(g, LY_I64, 2, ss_shape, &spatial, &ss));
    if (b.st == LY_OK) memcpy(ss, shapes, (size_t)levels * 2 * sizeof(int64_t));

    int64_t q = cfg->queries, ref4[4] = {LY_RESHAPE_KEEP, q, 1, 4};
    int64_t box_mlp[4] = {hidden, hidden, hidden, 4}, pos_mlp[3] = {4, 2 * hidden, hidden};
    ly_graph_value ref = ly_build_node(&b, LY_OP_SIGMOID, "ref", 1, &ref_unact, NULL);
    for (int i = 0; i < layers && b.st == LY_OK; i++) {
        char key[LY_KEY_MAX];
        /* layers past eval_idx are stored and never run (r50m runs 3 of its
         * 6): the recipe's key audit leaves them out */
        if (i > eval) break;
        snprintf(key, sizeof key, "dec_score_head.%d", i);
        if (i != eval) ly_build_expect_linear(&b, key, classes, hidden);
        ly_graph_value pos = ly_dfine_mlp(&b, "query_pos_head", ref, 2, pos_mlp, LY_OP_RELU);
        ly_dfine_layer_inputs in = {.target = target,
                                    .reference = ly_build_reshape(&b, "ref", ref, 4, ref4),
                                    .query_pos = pos,
                                    .memory = memory,
                                    .spatial_shapes = spatial};
        ly_graph_value out = LY_GRAPH_NONE;
        /* RT-DETR clamps to f16's range before norm3 (its nn.py), RT-DETRv2 not */
        ly_detr_layer_config layer = {.what = "RT-DETR decoder",
                                      .self_heads = cfg->heads,
                                      .cross_heads = cfg->heads,
                                      .clamp = cfg->v1,
                                      .levels = levels};
        snprintf(layer.prefix, sizeof layer.prefix, "decoder.decoder.layers.%d.", i);
        if (b.st == LY_OK) ly_build_fail(&b, ly_detr_decoder_layer(g, ck, &layer, &in, &out));
        snprintf(key, sizeof key, "dec_bbox_head.%d", i);
        ly_graph_value box =
            ly_build_binary(&b, LY_OP_ADD, key, ly_dfine_mlp(&b, key, out, 3, box_mlp, LY_OP_RELU),
                            ly_dfine_inverse_sigmoid(&b, ref));
        box = ly_build_node(&b, LY_OP_SIGMOID, key, 1, &box, NULL);
        if (i == eval) {
            snprintf(key, sizeof key, "dec_score_head.%d", i);
            *logits = ly_build_linear(&b, key, out, classes, hidden);
            *boxes = box;
        }
        ref = box;
        target = out;
    }
    return b.st;
}
