/* D-FINE's decoder layer as graph nodes (dfine.h; detr.md 4.5 and 6). */
#include "models/dfine/dfine.h"

#include "models/dfine/builder.h"

#include "core/core.h"
#include "libreyolo/msda.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Points per level from num_points_scale (1/n_l repeated n_l times, level
 * after level). */
static ly_status points_per_level(df_builder *b, int levels, int64_t total, const float *scale,
                                  int64_t *points)
{
    int64_t at = 0;
    for (int l = 0; l < levels; l++) {
        float s = at < total ? scale[at] : 0.0f;
        int64_t n = s > 0.0f && isfinite(s) ? (int64_t)lroundf(1.0f / s) : 0;
        if (n < 1 || at + n > total)
            return ly_set_error(LY_E_FORMAT,
                                "D-FINE decoder: %scross_attn.num_points_scale does not hold 1/n "
                                "repeated n times for each of %d levels",
                                b->prefix, levels);
        points[l] = n;
        at += n;
    }
    if (at != total)
        return ly_set_error(LY_E_FORMAT,
                            "D-FINE decoder: %scross_attn.num_points_scale has %lld entries, the "
                            "%d levels take %lld",
                            b->prefix, (long long)total, levels, (long long)at);
    return LY_OK;
}

/* MSDeformableAttention (detr.md 6, D-FINE row): no value or output projection. */
static ly_graph_value cross_attention(df_builder *b, ly_graph_value query,
                                      const ly_dfine_layer_inputs *in, int64_t q, int heads,
                                      int64_t c, int levels)
{
    /* Σpoints from the attention_weights rows: heads * Σpoints. */
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%scross_attn.attention_weights.bias", b->prefix);
    ly_tensor aw_bias;
    if (b->st == LY_OK && ly_checkpoint_find(b->ck, key, &aw_bias) != LY_OK) {
        df_fail(b, ly_set_error(LY_E_FORMAT, "D-FINE decoder: missing key '%s'", key));
        return LY_GRAPH_NONE;
    }
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    int64_t total = aw_bias.ndim == 1 ? aw_bias.shape[0] / heads : 0;
    if (total < 1 || total * heads != aw_bias.shape[0]) {
        df_fail(b, ly_set_error(LY_E_FORMAT, "D-FINE decoder: '%s' has no multiple of %d heads",
                                key, heads));
        return LY_GRAPH_NONE;
    }
    const float *scale = df_tensor(b, "cross_attn.num_points_scale", 1, &total);
    int64_t points[LY_MSDA_MAX_LEVELS];
    if (b->st == LY_OK && (levels < 1 || levels > LY_MSDA_MAX_LEVELS))
        df_fail(b, ly_set_error(LY_E_INVALID_ARGUMENT, "D-FINE decoder: %d levels", levels));
    if (b->st == LY_OK) df_fail(b, points_per_level(b, levels, total, scale, points));
    if (b->st != LY_OK) return LY_GRAPH_NONE;

    ly_graph_value offsets =
        df_linear(b, "cross_attn.sampling_offsets", query, heads * total * 2, c);
    int64_t off_shape[5] = {1, q, heads, total, 2};
    offsets = df_reshape(b, "cross_attn.offsets", offsets, 5, off_shape);
    ly_graph_value weights = df_linear(b, "cross_attn.attention_weights", query, heads * total, c);
    int64_t w_shape[4] = {1, q, heads, total};
    weights = df_reshape(b, "cross_attn.weights", weights, 4, w_shape);
    ly_axis_params last = LY_AXIS_DEFAULTS; /* jointly over every level's points, per head */
    weights = df_node(b, LY_OP_SOFTMAX, "cross_attn.softmax", 1, &weights, &last);

    /* loc = ref_xy + ((offset * num_points_scale) * ref_wh) * 0.5, in that order. */
    int64_t nps_shape[5] = {1, 1, 1, total, 1}, ref_shape[5] = {1, q, 1, 1, 2};
    ly_graph_value nps = df_constant(b, 5, nps_shape, scale);
    ly_graph_value xy =
        df_reshape(b, "cross_attn.ref_xy", df_slice(b, "cross_attn.ref_xy", in->reference, 3, 0, 2),
                   5, ref_shape);
    ly_graph_value wh =
        df_reshape(b, "cross_attn.ref_wh", df_slice(b, "cross_attn.ref_wh", in->reference, 3, 2, 2),
                   5, ref_shape);
    ly_graph_value off = df_binary(b, LY_OP_MUL, "cross_attn.scaled", offsets, nps);
    off = df_binary(b, LY_OP_MUL, "cross_attn.scaled_wh", off, wh);
    off = df_binary(b, LY_OP_MUL, "cross_attn.half", off, df_scalar(b, 0.5f));
    ly_graph_value loc = df_binary(b, LY_OP_ADD, "cross_attn.locations", xy, off);

    int64_t points_shape = levels;
    ly_graph_value np = LY_GRAPH_NONE;
    void *data = NULL;
    if (b->st == LY_OK) df_fail(b, ly_graph_constant(b->g, LY_I64, 1, &points_shape, &np, &data));
    if (b->st != LY_OK) return LY_GRAPH_NONE;
    memcpy(data, points, (size_t)levels * sizeof *points);
    int64_t value_shape[4] = {1, -1, heads, c / heads};
    ly_graph_value value = df_reshape(b, "cross_attn.value", in->memory, 4, value_shape);
    ly_graph_value msda_in[5] = {value, in->spatial_shapes, loc, weights, np};
    ly_ms_deform_attn_params mp = LY_MS_DEFORM_ATTN_DEFAULTS;
    return df_node(b, LY_OP_MS_DEFORM_ATTN, "cross_attn.core", 5, msda_in, &mp);
}

ly_status ly_dfine_decoder_layer(ly_graph *g, const ly_checkpoint *ck, int index, int heads,
                                 bool silu, int levels, const ly_dfine_layer_inputs *in,
                                 ly_graph_value *out)
{
    if (!g || !ck || !in || !out || heads < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_dfine_decoder_layer: bad argument");
    df_builder b = {.g = g, .ck = ck, .what = "D-FINE decoder", .st = LY_OK};
    snprintf(b.prefix, sizeof b.prefix, "decoder.decoder.layers.%d.", index);
    /* C from norm1; the query count Q is left to the reshapes (-1), so the
     * layer serves any Q. Batch 1. */
    char key[KEY_MAX];
    snprintf(key, sizeof key, "%snorm1.weight", b.prefix);
    ly_tensor norm1;
    if (ly_checkpoint_find(ck, key, &norm1) != LY_OK || norm1.ndim != 1 ||
        norm1.shape[0] % heads != 0)
        return ly_set_error(LY_E_FORMAT,
                            "D-FINE decoder: '%s' missing or not [C] with C a multiple of %d heads",
                            key, heads);
    int64_t c = norm1.shape[0], q = -1;

    ly_graph_value qk = df_binary(&b, LY_OP_ADD, "with_pos", in->target, in->query_pos);
    ly_graph_value attn = df_self_attention(&b, in->target, qk, q, heads, c);
    ly_graph_value x =
        df_layer_norm(&b, "norm1", df_binary(&b, LY_OP_ADD, "residual1", in->target, attn), c);

    ly_graph_value query = df_binary(&b, LY_OP_ADD, "cross_attn.query", x, in->query_pos);
    ly_graph_value sampled = cross_attention(&b, query, in, q, heads, c, levels);

    /* Gate: sigmoid(Linear([x, sampled])) split into halves. */
    ly_graph_value pair[2] = {x, sampled};
    ly_graph_value joined = LY_GRAPH_NONE;
    if (b.st == LY_OK) df_fail(&b, ly_graph_concat(g, "gateway.cat", 2, pair, 2, &joined));
    ly_graph_value gates = df_linear(&b, "gateway.gate", joined, 2 * c, 2 * c);
    gates = df_node(&b, LY_OP_SIGMOID, "gateway.sigmoid", 1, &gates, NULL);
    ly_graph_value g1 = df_slice(&b, "gateway.g1", gates, 2, 0, c);
    ly_graph_value g2 = df_slice(&b, "gateway.g2", gates, 2, c, c);
    x = df_binary(&b, LY_OP_ADD, "gateway.mix", df_binary(&b, LY_OP_MUL, "gateway.x", g1, x),
                  df_binary(&b, LY_OP_MUL, "gateway.attn", g2, sampled));
    x = df_layer_norm(&b, "gateway.norm", x, c);

    /* FFN (ReLU in D-FINE's decoder) + residual, clamped to f16's range, LayerNorm. */
    int64_t ff = 0;
    snprintf(key, sizeof key, "%slinear1.bias", b.prefix);
    ly_tensor l1;
    if (b.st == LY_OK && ly_checkpoint_find(ck, key, &l1) == LY_OK && l1.ndim == 1)
        ff = l1.shape[0];
    else if (b.st == LY_OK)
        df_fail(&b, ly_set_error(LY_E_FORMAT, "D-FINE decoder: missing key '%s'", key));
    ly_graph_value h = df_linear(&b, "linear1", x, ff, c);
    h = df_node(&b, silu ? LY_OP_SILU : LY_OP_RELU, "activation", 1, &h, NULL);
    h = df_linear(&b, "linear2", h, c, ff);
    x = df_binary(&b, LY_OP_ADD, "residual3", x, h);
    ly_clamp_params clamp = {.min = -65504.0, .max = 65504.0};
    x = df_node(&b, LY_OP_CLAMP, "clamp", 1, &x, &clamp);
    x = df_layer_norm(&b, "norm3", x, c);
    if (b.st != LY_OK) return b.st;
    *out = x;
    return LY_OK;
}
