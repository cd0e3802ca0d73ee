/* SPDX-License-Identifier: MIT */
/* D-FINE's decoder layer as graph nodes (dfine.h; detr.md 4.5 and 6). */
#include "models/dfine/dfine.h"

#include "models/common/builder.h"

#include "core/core.h"
#include "libreyolo/msda.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Points per level from num_points_scale (1/n_l repeated n_l times, level
 * after level). */
static ly_status points_per_level(ly_builder *b, int levels, int64_t total, const float *scale,
                                  int64_t *points)
{
    int64_t at = 0;
    for (int l = 0; l < levels; l++) {
        float s = at < total ? scale[at] : 0.0f;
        int64_t n = s > 0.0f && isfinite(s) ? (int64_t)lroundf(1.0f / s) : 0;
        if (n < 1 || at + n > total)
            return ly_set_error(LY_E_FORMAT,
                                "%s: %scross_attn.num_points_scale does not hold 1/n "
                                "repeated n times for each of %d levels",
                                b->what, b->prefix, levels);
        points[l] = n;
        at += n;
    }
    if (at != total)
        return ly_set_error(LY_E_FORMAT,
                            "%s: %scross_attn.num_points_scale has %lld entries, the "
                            "%d levels take %lld",
                            b->what, b->prefix, (long long)total, levels, (long long)at);
    return LY_OK;
}

/* MSDeformableAttention (detr.md 6; rtdetr.md 6): D-FINE's without value or
 * output projection, RT-DETR's (v1 and v2) with them. */
static ly_graph_value cross_attention(ly_builder *b, ly_graph_value query,
                                      const ly_dfine_layer_inputs *in, int64_t q, int heads,
                                      int64_t c, int levels)
{
    /* Σpoints from the attention_weights rows: heads * Σpoints. */
    char key[LY_KEY_MAX];
    snprintf(key, sizeof key, "%scross_attn.attention_weights.bias", b->prefix);
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    int64_t rows = ly_build_extent(b, "cross_attn.attention_weights.bias", 0);
    int64_t total = rows > 0 ? rows / heads : 0;
    if (total < 1 || total * heads != rows) {
        ly_build_fail(b, ly_set_error(LY_E_FORMAT,
                                      "%s: '%s' missing or not [heads * points] for %d heads",
                                      b->what, key, heads));
        return LY_GRAPH_NONE;
    }
    /* v2 (D-FINE, RT-DETRv2) keeps num_points_scale; RT-DETR's points are P
     * per level, its offsets divided by P */
    bool uniform = ly_build_extent(b, "cross_attn.num_points_scale", 0) < 0 && levels > 0 &&
                   total % levels == 0 && ly_build_extent(b, "cross_attn.value_proj.weight", 0) > 0;
    const float *scale =
        uniform ? NULL : ly_build_take(b, "cross_attn.num_points_scale", 1, &total);
    int64_t points[LY_MSDA_MAX_LEVELS];
    if (b->st == LY_OK && (levels < 1 || levels > LY_MSDA_MAX_LEVELS))
        ly_build_fail(b, ly_set_error(LY_E_INVALID_ARGUMENT, "%s: %d levels", b->what, levels));
    if (b->st == LY_OK && uniform)
        for (int l = 0; l < levels; l++)
            points[l] = total / levels;
    else if (b->st == LY_OK)
        ly_build_fail(b, points_per_level(b, levels, total, scale, points));
    if (b->st != LY_OK) return LY_GRAPH_NONE;

    ly_graph_value offsets =
        ly_build_linear(b, "cross_attn.sampling_offsets", query, heads * total * 2, c);
    int64_t off_shape[5] = {LY_RESHAPE_KEEP, q, heads, total, 2};
    offsets = ly_build_reshape(b, "cross_attn.offsets", offsets, 5, off_shape);
    ly_graph_value weights =
        ly_build_linear(b, "cross_attn.attention_weights", query, heads * total, c);
    int64_t w_shape[4] = {LY_RESHAPE_KEEP, q, heads, total};
    weights = ly_build_reshape(b, "cross_attn.weights", weights, 4, w_shape);
    ly_axis_params last = LY_AXIS_DEFAULTS; /* jointly over every level's points, per head */
    weights = ly_build_node(b, LY_OP_SOFTMAX, "cross_attn.softmax", 1, &weights, &last);

    /* loc = ref_xy + ((offset * num_points_scale) * ref_wh) * 0.5, in that
     * order (RT-DETR: offset / P for offset * num_points_scale). */
    int64_t nps_shape[5] = {1, 1, 1, total, 1}, ref_shape[5] = {LY_RESHAPE_KEEP, q, 1, 1, 2};
    ly_graph_value nps =
        uniform ? ly_build_scalar(b, (float)points[0]) : ly_build_constant(b, 5, nps_shape, scale);
    ly_graph_value xy = ly_build_reshape(
        b, "cross_attn.ref_xy", ly_build_slice(b, "cross_attn.ref_xy", in->reference, 3, 0, 2), 5,
        ref_shape);
    ly_graph_value wh = ly_build_reshape(
        b, "cross_attn.ref_wh", ly_build_slice(b, "cross_attn.ref_wh", in->reference, 3, 2, 2), 5,
        ref_shape);
    ly_graph_value off =
        ly_build_binary(b, uniform ? LY_OP_DIV : LY_OP_MUL, "cross_attn.scaled", offsets, nps);
    off = ly_build_binary(b, LY_OP_MUL, "cross_attn.scaled_wh", off, wh);
    off = ly_build_binary(b, LY_OP_MUL, "cross_attn.half", off, ly_build_scalar(b, 0.5f));
    ly_graph_value loc = ly_build_binary(b, LY_OP_ADD, "cross_attn.locations", xy, off);

    int64_t points_shape = levels;
    ly_graph_value np = LY_GRAPH_NONE;
    void *data = NULL;
    if (b->st == LY_OK)
        ly_build_fail(b, ly_graph_constant(b->g, LY_I64, 1, &points_shape, &np, &data));
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    memcpy(data, points, (size_t)levels * sizeof *points);
    /* RT-DETR's attention projects the value and the output; D-FINE's not */
    bool projections = ly_build_extent(b, "cross_attn.value_proj.weight", 0) > 0;
    ly_graph_value value =
        projections ? ly_build_linear(b, "cross_attn.value_proj", in->memory, c, c) : in->memory;
    int64_t value_shape[4] = {LY_RESHAPE_KEEP, -1, heads, c / heads};
    value = ly_build_reshape(b, "cross_attn.value", value, 4, value_shape);
    ly_graph_value msda_in[5] = {value, in->spatial_shapes, loc, weights, np};
    ly_ms_deform_attn_params mp = LY_MS_DEFORM_ATTN_DEFAULTS;
    ly_graph_value core =
        ly_build_node(b, LY_OP_MS_DEFORM_ATTN, "cross_attn.core", 5, msda_in, &mp);
    return projections ? ly_build_linear(b, "cross_attn.output_proj", core, c, c) : core;
}

/* nn.LayerNorm (keys .weight, .bias; eps 1e-5) or DEIMv2's RMSNorm (key
 * .scale; eps 1e-6, in f32 as its forward casts): the keys say which. */
static ly_graph_value norm(ly_builder *b, const char *name, ly_graph_value x, int64_t c)
{
    char key[LY_KEY_MAX];
    snprintf(key, sizeof key, "%s.scale", name);
    if (ly_build_extent(b, key, 0) < 0) return ly_build_layer_norm(b, name, x, c, 1e-5);
    ly_graph_value scale = ly_build_weight(b, key, 1, &c);
    ly_norm_params p = LY_NORM_DEFAULTS;
    p.eps = 1e-6;
    ly_graph_value in[2] = {x, scale};
    return ly_build_node(b, LY_OP_RMS_NORM, name, 2, in, &p);
}

/* The FFN: D-FINE's Linear -> act -> Linear, or DEIMv2's SwiGLU (w12 to
 * twice the hidden width, silu(first half) * second half, w3). */
static ly_graph_value ffn(ly_builder *b, ly_graph_value x, int64_t c, bool silu)
{
    int64_t swiglu = ly_build_extent(b, "swish_ffn.w12.weight", 0);
    if (swiglu > 0) {
        int64_t hidden = swiglu / 2;
        ly_graph_value both = ly_build_linear(b, "swish_ffn.w12", x, 2 * hidden, c);
        ly_graph_value x1 = ly_build_slice(b, "swish_ffn.x1", both, 2, 0, hidden);
        ly_graph_value x2 = ly_build_slice(b, "swish_ffn.x2", both, 2, hidden, hidden);
        x1 = ly_build_node(b, LY_OP_SILU, "swish_ffn.silu", 1, &x1, NULL);
        ly_graph_value h = ly_build_binary(b, LY_OP_MUL, "swish_ffn.glu", x1, x2);
        return ly_build_linear(b, "swish_ffn.w3", h, c, hidden);
    }
    int64_t ff = ly_build_extent(b, "linear1.weight", 0);
    if (ff <= 0 && b->st == LY_OK)
        ly_build_fail(b, ly_set_error(LY_E_FORMAT,
                                      "%s: no FFN keys ('%slinear1.weight' or "
                                      "'%sswish_ffn.w12.weight')",
                                      b->what, b->prefix, b->prefix));
    /* ReLU in linear1's epilogue (exact there too); SiLU a node of its own */
    ly_graph_value h = ly_build_linear_fused(b, "linear1", x, ff, c,
                                             silu ? LY_ACT_NONE : LY_ACT_RELU, LY_GRAPH_NONE);
    if (silu) h = ly_build_node(b, LY_OP_SILU, "activation", 1, &h, NULL);
    return ly_build_linear(b, "linear2", h, c, ff);
}

ly_status ly_detr_decoder_layer(ly_graph *g, const ly_checkpoint *ck,
                                const ly_detr_layer_config *cfg, const ly_dfine_layer_inputs *in,
                                ly_graph_value *out)
{
    if (!g || !ck || !cfg || !in || !out || cfg->self_heads < 1 || cfg->cross_heads < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_detr_decoder_layer: bad argument");
    int heads = cfg->self_heads, levels = cfg->levels;
    bool silu = cfg->silu;
    ly_builder b = {.g = g, .ck = ck, .what = cfg->what, .st = LY_OK};
    snprintf(b.prefix, sizeof b.prefix, "%s", cfg->prefix);
    /* C from norm1 (LayerNorm's weight or RMSNorm's scale); the query count
     * Q is left to the reshapes (-1), so the layer serves any Q, and the
     * batch is kept by every reshape, so it serves any batch. */
    int64_t c = ly_build_extent(&b, "norm1.weight", 0);
    if (c <= 0) c = ly_build_extent(&b, "norm1.scale", 0);
    if (c <= 0 || c % heads != 0 || c % cfg->cross_heads != 0)
        return ly_set_error(LY_E_FORMAT,
                            "%s: '%snorm1.weight' (or .scale) missing or not [C] with C a multiple "
                            "of %d and %d heads",
                            cfg->what, b.prefix, heads, cfg->cross_heads);
    int64_t q = -1;

    ly_graph_value qk = ly_build_binary(&b, LY_OP_ADD, "with_pos", in->target, in->query_pos);
    ly_graph_value attn = ly_build_mha(&b, "self_attn", in->target, qk, q, heads, c);
    ly_graph_value x =
        norm(&b, "norm1", ly_build_binary(&b, LY_OP_ADD, "residual1", in->target, attn), c);

    ly_graph_value query = ly_build_binary(&b, LY_OP_ADD, "cross_attn.query", x, in->query_pos);
    ly_graph_value sampled = cross_attention(&b, query, in, q, cfg->cross_heads, c, levels);

    if (ly_build_extent(&b, "gateway.gate.weight", 0) > 0) {
        /* Gate: sigmoid(Linear([x, sampled])) split into halves. */
        ly_graph_value pair[2] = {x, sampled};
        ly_graph_value joined = LY_GRAPH_NONE;
        if (b.st == LY_OK)
            ly_build_fail(&b, ly_graph_concat(g, "gateway.cat", 2, pair, 2, &joined));
        ly_graph_value gates = ly_build_linear(&b, "gateway.gate", joined, 2 * c, 2 * c);
        gates = ly_build_node(&b, LY_OP_SIGMOID, "gateway.sigmoid", 1, &gates, NULL);
        ly_graph_value g1 = ly_build_slice(&b, "gateway.g1", gates, 2, 0, c);
        ly_graph_value g2 = ly_build_slice(&b, "gateway.g2", gates, 2, c, c);
        x = ly_build_binary(&b, LY_OP_ADD, "gateway.mix",
                            ly_build_binary(&b, LY_OP_MUL, "gateway.x", g1, x),
                            ly_build_binary(&b, LY_OP_MUL, "gateway.attn", g2, sampled));
        x = norm(&b, "gateway.norm", x, c);
    } else {
        /* DEIMv2 atto-pico (use_gateway False): residual, norm2. */
        x = norm(&b, "norm2", ly_build_binary(&b, LY_OP_ADD, "residual2", x, sampled), c);
    }

    /* FFN + residual, (D-FINE) clamped to f16's range, norm3. */
    x = ly_build_binary(&b, LY_OP_ADD, "residual3", x, ffn(&b, x, c, silu));
    if (cfg->clamp) {
        ly_clamp_params clamp = {.min = -65504.0, .max = 65504.0};
        x = ly_build_node(&b, LY_OP_CLAMP, "clamp", 1, &x, &clamp);
    }
    x = norm(&b, "norm3", x, c);
    if (b.st != LY_OK) return b.st;
    *out = x;
    return LY_OK;
}

ly_status ly_dfine_decoder_layer(ly_graph *g, const ly_checkpoint *ck, int index, int heads,
                                 bool silu, int levels, const ly_dfine_layer_inputs *in,
                                 ly_graph_value *out)
{
    ly_detr_layer_config cfg = {.what = "D-FINE decoder",
                                .self_heads = heads,
                                .cross_heads = heads,
                                .silu = silu,
                                .clamp = true,
                                .levels = levels};
    snprintf(cfg.prefix, sizeof cfg.prefix, "decoder.decoder.layers.%d.", index);
    return ly_detr_decoder_layer(g, ck, &cfg, in, out);
}
