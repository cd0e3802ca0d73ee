/* SPDX-License-Identifier: MIT */
/* The D-FINE/DEIM hybrid encoder as graph nodes (dfine.h; detr.md 4,
 * LibreYOLO's models/deim/encoder.py). */
#include "models/dfine/dfine.h"

#include "core/core.h"
#include "models/common/fold.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SILU LY_ACT_SILU
#define NONE LY_ACT_NONE

/* VGGBlock: act(BN(conv3x3 x) + BN(conv1x1 x)), the 1x1 folded into the
 * 3x3's centre tap (what convert_to_deploy does). */
static ly_fmap vgg_block(ly_builder *b, const char *name, ly_fmap x)
{
    ly_fmap y = {LY_GRAPH_NONE, x.c, x.h, x.w};
    int64_t c = x.c;
    double *w3 = malloc((size_t)(c * c * 9) * sizeof *w3), *b3 = malloc((size_t)c * sizeof *b3);
    double *w1 = malloc((size_t)(c * c) * sizeof *w1), *b1 = malloc((size_t)c * sizeof *b1);
    char key[2 * LY_KEY_MAX];
    if (!w3 || !b3 || !w1 || !b1) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    } else {
        bool ok = true;
        for (int branch = 1; branch <= 2 && ok; branch++) {
            char bn[2 * LY_KEY_MAX];
            snprintf(key, sizeof key, "%.100s.conv%d.conv.weight", name, branch);
            snprintf(bn, sizeof bn, "%.100s.conv%d.norm", name, branch);
            ok = ly_fold_conv_bn(b, key, bn, c, c, branch == 1 ? 3 : 1, branch == 1 ? w3 : w1,
                                 branch == 1 ? b3 : b1);
        }
        if (ok) {
            ly_fold_add_centred(w3, b3, w1, b1, c, c, 1, 3);
            y = ly_build_conv_folded(b, name, x, w3, b3, c, 3, 1, 1, SILU, NULL);
        }
    }
    free(w3);
    free(b3);
    free(w1);
    free(b1);
    return y;
}

/* CSPLayer (expansion 1, so no conv3): bottlenecks(conv1 x) + conv2 x. */
static ly_fmap csp_layer(ly_builder *b, const char *name, ly_fmap x, int64_t cout, int blocks)
{
    char key[2 * LY_KEY_MAX];
    snprintf(key, sizeof key, "%.100s.conv1", name);
    ly_fmap x1 = ly_build_conv_norm(b, key, "norm", x, cout, 1, 1, false, SILU, NULL);
    for (int i = 0; i < blocks; i++) {
        snprintf(key, sizeof key, "%.100s.bottlenecks.%d", name, i);
        x1 = vgg_block(b, key, x1);
    }
    snprintf(key, sizeof key, "%.100s.conv2", name);
    ly_fmap x2 = ly_build_conv_norm(b, key, "norm", x, cout, 1, 1, false, SILU, NULL);
    x1.v = ly_build_binary(b, LY_OP_ADD, key, x1.v, x2.v);
    return x1;
}

/* DEIMv2's CSPLayer2 (expansion 1): conv1 to twice the width, halves y0, y1;
 * y0 + bottlenecks(y1). */
static ly_fmap csp_layer2(ly_builder *b, const char *name, ly_fmap x, int64_t cout, int blocks)
{
    char key[2 * LY_KEY_MAX];
    snprintf(key, sizeof key, "%.100s.conv1", name);
    ly_fmap both = ly_build_conv_norm(b, key, "norm", x, 2 * cout, 1, 1, false, SILU, NULL);
    ly_fmap y0 = {ly_build_slice(b, key, both.v, 1, 0, cout), cout, both.h, both.w};
    ly_fmap y1 = {ly_build_slice(b, key, both.v, 1, cout, cout), cout, both.h, both.w};
    for (int i = 0; i < blocks; i++) {
        snprintf(key, sizeof key, "%.100s.bottlenecks.%d", name, i);
        y1 = vgg_block(b, key, y1);
    }
    y0.v = ly_build_binary(b, LY_OP_ADD, key, y0.v, y1.v);
    return y0;
}

/* RepNCSPELAN4(c1 -> c2; c3, c4, the bottleneck count and the CSP flavour
 * read from the keys):
 * cv1 split in halves; cv2 = CSP + 3x3 on the second half, cv3 = CSP + 3x3 on
 * that; cv4 over all four. */
static ly_fmap rep_ncsp_elan4(ly_builder *b, const char *name, ly_fmap x, int64_t c2)
{
    ly_fmap none = {LY_GRAPH_NONE, c2, x.h, x.w};
    char key[2 * LY_KEY_MAX];
    /* CSPLayer has conv1 and conv2 on the input; DEIMv2's CSPLayer2 one conv1 */
    snprintf(key, sizeof key, "%.100s.cv2.0.conv2.conv.weight", name);
    bool csp2 = ly_build_extent(b, key, 0) < 0;
    ly_fmap (*csp)(ly_builder *, const char *, ly_fmap, int64_t, int) =
        csp2 ? csp_layer2 : csp_layer;
    snprintf(key, sizeof key, "%.100s.cv1.conv.weight", name);
    int64_t c3 = ly_build_extent(b, key, 0);
    snprintf(key, sizeof key, "%.100s.cv2.1.conv.weight", name);
    int64_t c4 = ly_build_extent(b, key, 0);
    int blocks = 0;
    for (;; blocks++) {
        snprintf(key, sizeof key, "%.100s.cv2.0.bottlenecks.%d.conv1.conv.weight", name, blocks);
        if (ly_build_extent(b, key, 0) < 0) break;
    }
    if (c3 <= 0 || c3 % 2 || c4 <= 0) {
        ly_build_fail(b, ly_set_error(LY_E_FORMAT,
                                      "%s: missing or misshapen keys %s%.100s.cv1.conv.weight / "
                                      "cv2.1.conv.weight",
                                      b->what, b->prefix, name));
        return none;
    }
    snprintf(key, sizeof key, "%.100s.cv1", name);
    ly_fmap y1 = ly_build_conv_norm(b, key, "norm", x, c3, 1, 1, false, SILU, NULL);
    ly_fmap halves[2] = {{ly_build_slice(b, key, y1.v, 1, 0, c3 / 2), c3 / 2, y1.h, y1.w},
                         {ly_build_slice(b, key, y1.v, 1, c3 / 2, c3 / 2), c3 / 2, y1.h, y1.w}};
    snprintf(key, sizeof key, "%.100s.cv2.0", name);
    ly_fmap y2 = csp(b, key, halves[1], c4, blocks);
    snprintf(key, sizeof key, "%.100s.cv2.1", name);
    y2 = ly_build_conv_norm(b, key, "norm", y2, c4, 3, 1, false, SILU, NULL);
    snprintf(key, sizeof key, "%.100s.cv3.0", name);
    ly_fmap y3 = csp(b, key, y2, c4, blocks);
    snprintf(key, sizeof key, "%.100s.cv3.1", name);
    y3 = ly_build_conv_norm(b, key, "norm", y3, c4, 3, 1, false, SILU, NULL);
    ly_graph_value parts[4] = {halves[0].v, halves[1].v, y2.v, y3.v};
    ly_fmap cat = {LY_GRAPH_NONE, c3 + 2 * c4, x.h, x.w};
    snprintf(key, sizeof key, "%s%.100s.cat", b->prefix, name);
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_concat(b->g, key, 4, parts, 1, &cat.v));
    snprintf(key, sizeof key, "%.100s.cv4", name);
    return ly_build_conv_norm(b, key, "norm", cat, c2, 1, 1, false, SILU, NULL);
}

/* RT-DETR's CSPRepLayer: conv3(bottlenecks(conv1 x) + conv2 x) with its
 * hidden width and bottleneck count from the keys; conv3 a 1x1
 * ConvNormLayer + SiLU where its keys are, identity (hidden == c) where not. */
static ly_fmap csp_rep_layer(ly_builder *b, const char *name, ly_fmap x, int64_t c)
{
    char key[2 * LY_KEY_MAX];
    snprintf(key, sizeof key, "%.100s.conv1.conv.weight", name);
    int64_t hidden = ly_build_extent(b, key, 0);
    int blocks = 0;
    for (;; blocks++) {
        snprintf(key, sizeof key, "%.100s.bottlenecks.%d.conv1.conv.weight", name, blocks);
        if (ly_build_extent(b, key, 0) < 0) break;
    }
    snprintf(key, sizeof key, "%.100s.conv3.conv.weight", name);
    bool conv3 = ly_build_extent(b, key, 0) >= 0;
    if (hidden <= 0 || (!conv3 && hidden != c)) {
        ly_build_fail(b, ly_set_error(LY_E_FORMAT,
                                      "%s: missing or misshapen keys %s%.100s.conv1.conv.weight / "
                                      "conv3.conv.weight",
                                      b->what, b->prefix, name));
        return (ly_fmap){LY_GRAPH_NONE, c, x.h, x.w};
    }
    ly_fmap y = csp_layer(b, name, x, hidden, blocks);
    if (!conv3) return y;
    snprintf(key, sizeof key, "%.100s.conv3", name);
    return ly_build_conv_norm(b, key, "norm", y, c, 1, 1, false, SILU, NULL);
}

/* build_2d_sincos_position_embedding(w, h, c): rows in meshgrid(w, h, "ij")
 * order, that is w-major, [sin(w·ω), cos(w·ω), sin(h·ω), cos(h·ω)] with
 * ω_i = 1 / 10000^(i / (c/4)); added to the h-major tokens row by row, as
 * LibreYOLO adds it. */
static ly_graph_value position_embedding(ly_builder *b, int64_t h, int64_t w, int64_t c)
{
    int64_t shape[3] = {1, h * w, c}, quarter = c / 4;
    float *pe = malloc((size_t)(h * w * c) * sizeof *pe);
    if (!pe) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
        return LY_GRAPH_NONE;
    }
    for (int64_t gw = 0; gw < w; gw++)
        for (int64_t gh = 0; gh < h; gh++) {
            float *row = pe + (gw * h + gh) * c;
            for (int64_t i = 0; i < quarter; i++) {
                /* float32 as torch computes ω and the products */
                float omega = 1.0f / powf(10000.0f, (float)i / (float)quarter);
                float ow = (float)gw * omega, oh = (float)gh * omega;
                row[i] = sinf(ow);
                row[quarter + i] = cosf(ow);
                row[2 * quarter + i] = sinf(oh);
                row[3 * quarter + i] = cosf(oh);
            }
        }
    ly_graph_value v = ly_build_constant(b, 3, shape, pe);
    free(pe);
    return v;
}

/* AIFI: one post-norm TransformerEncoderLayer on the flattened map. */
static ly_fmap aifi(ly_builder *b, ly_fmap x, int heads)
{
    int64_t hw = x.h * x.w, c = x.c;
    static const int64_t to_tokens[3] = {0, 2, 1};
    int64_t flat[3] = {LY_RESHAPE_KEEP, c, hw}, map[4] = {LY_RESHAPE_KEEP, c, x.h, x.w};
    ly_graph_value src =
        ly_build_permute(b, "tokens", ly_build_reshape(b, "tokens", x.v, 3, flat), 3, to_tokens);
    ly_graph_value qk =
        ly_build_binary(b, LY_OP_ADD, "pos", src, position_embedding(b, x.h, x.w, c));
    ly_graph_value attn = ly_build_mha(b, "self_attn", src, qk, hw, heads, c);
    ly_graph_value t =
        ly_build_layer_norm(b, "norm1", ly_build_binary(b, LY_OP_ADD, "res1", src, attn), c, 1e-5);
    int64_t ff = ly_build_extent(b, "linear1.weight", 0);
    if (ff <= 0 && b->st == LY_OK)
        ly_build_fail(
            b, ly_set_error(LY_E_FORMAT, "%s: missing key '%slinear1.weight'", b->what, b->prefix));
    ly_graph_value f = ly_build_linear(b, "linear1", t, ff, c);
    f = ly_build_node(b, LY_OP_GELU, "gelu", 1, &f, NULL);
    f = ly_build_linear(b, "linear2", f, c, ff);
    t = ly_build_layer_norm(b, "norm2", ly_build_binary(b, LY_OP_ADD, "res2", t, f), c, 1e-5);
    x.v = ly_build_reshape(b, "map", ly_build_permute(b, "map", t, 3, to_tokens), 4, map);
    return x;
}

/* The fusion of a resampled map with a level's: concat (D-FINE) or sum (DEIMv2). */
static ly_fmap fuse(ly_builder *b, const char *name, bool sum, ly_graph_value resampled,
                    ly_fmap level)
{
    ly_fmap y = {LY_GRAPH_NONE, sum ? level.c : 2 * level.c, level.h, level.w};
    if (sum) {
        y.v = ly_build_binary(b, LY_OP_ADD, name, resampled, level.v);
        return y;
    }
    ly_graph_value pair[2] = {resampled, level.v};
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_concat(b->g, name, 2, pair, 1, &y.v));
    return y;
}

/* RT-DETR's input projection, an unnamed Sequential: a 1x1 conv (keys
 * input_proj.<l>.0.weight) and its BatchNorm (input_proj.<l>.1.*), folded. */
static ly_fmap input_proj_sequential(ly_builder *b, int l, ly_fmap x, int64_t hidden)
{
    ly_fmap y = {LY_GRAPH_NONE, hidden, x.h, x.w};
    double *w = malloc((size_t)(hidden * x.c) * sizeof *w),
           *bias = malloc((size_t)hidden * sizeof *bias);
    char conv[LY_KEY_MAX], bn[LY_KEY_MAX], name[LY_KEY_MAX];
    snprintf(conv, sizeof conv, "input_proj.%d.0.weight", l);
    snprintf(bn, sizeof bn, "input_proj.%d.1", l);
    snprintf(name, sizeof name, "input_proj.%d", l);
    if (!w || !bias)
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    else if (ly_fold_conv_bn(b, conv, bn, hidden, x.c, 1, w, bias))
        y = ly_build_conv_folded(b, name, x, w, bias, hidden, 1, 1, 1, NONE, NULL);
    free(w);
    free(bias);
    return y;
}

ly_status ly_dfine_hybrid_encoder(ly_graph *g, const ly_checkpoint *ck, int levels,
                                  const ly_graph_value *feats, const int64_t (*shapes)[3],
                                  int aifi_level, int heads, ly_graph_value *outs)
{
    if (levels < 2 || levels > 3 || aifi_level < 0 || aifi_level >= levels)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "hybrid encoder: %d levels, AIFI on %d", levels,
                            aifi_level);
    ly_builder b = {.g = g, .ck = ck, .what = "hybrid encoder", .prefix = "encoder.", .st = LY_OK};
    int64_t hidden = ly_build_extent(&b, "lateral_convs.0.conv.weight", 0);
    if (hidden <= 0 || hidden % 4)
        return ly_set_error(LY_E_FORMAT,
                            "hybrid encoder: key 'encoder.lateral_convs.0.conv.weight' missing or "
                            "not [C, ...] with C a multiple of 4");
    /* RT-DETR's encoder (CSPRepLayer blocks, SiLU laterals, 3x3 stride-2
     * downsampling, Sequential-numbered input_proj) has keys D-FINE's lacks */
    bool rtdetr = ly_build_extent(&b, "fpn_blocks.0.conv1.conv.weight", 0) > 0;
    /* DEIMv2's encoder sums where D-FINE's concatenates (fuse_op "sum"): the
     * fuse blocks' input width says which */
    int64_t fuse_in = ly_build_extent(
        &b, rtdetr ? "fpn_blocks.0.conv1.conv.weight" : "fpn_blocks.0.cv1.conv.weight", 1);
    bool sum = fuse_in == hidden;
    if (!sum && fuse_in != 2 * hidden)
        return ly_set_error(LY_E_FORMAT,
                            "hybrid encoder: key 'encoder.fpn_blocks.0.%s.conv.weight' missing or "
                            "not [*, %lld or %lld, 1, 1]",
                            rtdetr ? "conv1" : "cv1", (long long)hidden, (long long)(2 * hidden));
    ly_fmap proj[3];
    char name[2 * LY_KEY_MAX];
    for (int l = 0; l < levels; l++) {
        ly_fmap x = {feats[l], shapes[l][0], shapes[l][1], shapes[l][2]};
        if (rtdetr) {
            proj[l] = input_proj_sequential(&b, l, x, hidden);
            continue;
        }
        snprintf(name, sizeof name, "input_proj.%d.conv.weight", l);
        bool identity = ly_build_extent(&b, name, 0) < 0 && x.c == hidden;
        snprintf(name, sizeof name, "input_proj.%d", l);
        proj[l] =
            identity ? x : ly_build_conv_norm(&b, name, "norm", x, hidden, 1, 1, false, NONE, NULL);
    }
    snprintf(b.prefix, sizeof b.prefix, "encoder.encoder.0.layers.0.");
    proj[aifi_level] = aifi(&b, proj[aifi_level], heads);
    snprintf(b.prefix, sizeof b.prefix, "encoder.");

    /* top-down: inner[l] for l = levels-1 .. 0 */
    ly_fmap inner[3];
    inner[levels - 1] = proj[levels - 1];
    for (int l = levels - 1; l > 0; l--) {
        int k = levels - 1 - l;
        snprintf(name, sizeof name, "lateral_convs.%d", k);
        ly_fmap high = ly_build_conv_norm(&b, name, "norm", inner[l], hidden, 1, 1, false,
                                          rtdetr ? SILU : NONE, NULL);
        inner[l] = high;
        char node_name[2 * LY_KEY_MAX];
        snprintf(node_name, sizeof node_name, "encoder.fpn_up.%d", k);
        ly_graph_value upsampled = LY_GRAPH_NONE;
        if (b.st == LY_OK)
            ly_build_fail(&b, ly_graph_upsample_nearest2d(g, node_name, high.v, 2, &upsampled));
        ly_fmap fused = fuse(&b, node_name, sum, upsampled, proj[l - 1]);
        snprintf(name, sizeof name, "fpn_blocks.%d", k);
        inner[l - 1] = rtdetr ? csp_rep_layer(&b, name, fused, hidden)
                              : rep_ncsp_elan4(&b, name, fused, hidden);
    }
    /* bottom-up */
    ly_fmap out = inner[0];
    outs[0] = out.v;
    for (int l = 0; l + 1 < levels; l++) {
        ly_fmap down;
        if (rtdetr) {
            snprintf(name, sizeof name, "downsample_convs.%d", l);
            down = ly_build_conv_norm(&b, name, "norm", out, hidden, 3, 2, false, SILU, NULL);
        } else { /* SCDown */
            snprintf(name, sizeof name, "downsample_convs.%d.0.cv1", l);
            down = ly_build_conv_norm(&b, name, "norm", out, hidden, 1, 1, false, NONE, NULL);
            snprintf(name, sizeof name, "downsample_convs.%d.0.cv2", l);
            down = ly_build_conv_norm(&b, name, "norm", down, hidden, 3, 2, true, NONE, NULL);
        }
        char node_name[2 * LY_KEY_MAX];
        snprintf(node_name, sizeof node_name, "encoder.pan_cat.%d", l);
        ly_fmap fused = fuse(&b, node_name, sum, down.v, inner[l + 1]);
        snprintf(name, sizeof name, "pan_blocks.%d", l);
        out = rtdetr ? csp_rep_layer(&b, name, fused, hidden)
                     : rep_ncsp_elan4(&b, name, fused, hidden);
        outs[l + 1] = out.v;
    }
    return b.st;
}

/* LiteEncoder's down_sample: AvgPool 3x3 s2 p1 (counting the padding), 1x1
 * conv (keys <name>.1.weight) + BN (<name>.2.*), SiLU. */
static ly_fmap lite_down(ly_builder *b, const char *name, ly_fmap x)
{
    ly_fmap pooled = {LY_GRAPH_NONE, x.c, (x.h + 2 - 3) / 2 + 1, (x.w + 2 - 3) / 2 + 1};
    ly_pool2d_params p = LY_POOL2D_DEFAULTS;
    p.kernel[0] = p.kernel[1] = 3;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0] = p.padding[1] = 1;
    char key[2 * LY_KEY_MAX], bn[2 * LY_KEY_MAX];
    snprintf(key, sizeof key, "%s%.100s.0", b->prefix, name);
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_avg_pool2d(b->g, key, x.v, &p, &pooled.v));
    double *w = malloc((size_t)(x.c * x.c) * sizeof *w), *bias = malloc((size_t)x.c * sizeof *bias);
    ly_fmap y = {LY_GRAPH_NONE, x.c, pooled.h, pooled.w};
    snprintf(key, sizeof key, "%.100s.1.weight", name);
    snprintf(bn, sizeof bn, "%.100s.2", name);
    if (!w || !bias)
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    else if (ly_fold_conv_bn(b, key, bn, x.c, x.c, 1, w, bias))
        y = ly_build_conv_folded(b, name, pooled, w, bias, x.c, 1, 1, 1, SILU, NULL);
    free(w);
    free(bias);
    return y;
}

ly_status ly_dfine_lite_encoder(ly_graph *g, const ly_checkpoint *ck, ly_graph_value feat,
                                const int64_t shape[3], ly_graph_value *outs)
{
    ly_builder b = {.g = g, .ck = ck, .what = "LiteEncoder", .prefix = "encoder.", .st = LY_OK};
    int64_t hidden = ly_build_extent(&b, "input_proj.0.conv.weight", 0);
    if (hidden <= 0)
        return ly_set_error(LY_E_FORMAT, "LiteEncoder: key 'encoder.input_proj.0.conv.weight' "
                                         "missing or not a conv weight");
    ly_fmap x = {feat, shape[0], shape[1], shape[2]};
    ly_fmap p16 =
        ly_build_conv_norm(&b, "input_proj.0", "norm", x, hidden, 1, 1, false, NONE, NULL);
    ly_fmap p32 = lite_down(&b, "down_sample1", p16);
    /* GAP_Fusion: x + its global average, then a 1x1 ConvNorm + SiLU */
    ly_pool2d_params gap = LY_POOL2D_DEFAULTS;
    gap.kernel[0] = gap.stride[0] = p32.h;
    gap.kernel[1] = gap.stride[1] = p32.w;
    ly_graph_value mean = LY_GRAPH_NONE;
    if (b.st == LY_OK)
        ly_build_fail(&b, ly_graph_avg_pool2d(g, "encoder.bi_fusion.gap", p32.v, &gap, &mean));
    p32.v = ly_build_binary(&b, LY_OP_ADD, "bi_fusion", p32.v, mean);
    p32 = ly_build_conv_norm(&b, "bi_fusion.cv", "norm", p32, hidden, 1, 1, false, SILU, NULL);
    ly_graph_value up = LY_GRAPH_NONE;
    if (b.st == LY_OK)
        ly_build_fail(&b, ly_graph_upsample_nearest2d(g, "encoder.fpn_up", p32.v, 2, &up));
    ly_fmap fuse0 = {ly_build_binary(&b, LY_OP_ADD, "fpn", p16.v, up), hidden, p16.h, p16.w};
    ly_fmap out0 = rep_ncsp_elan4(&b, "fpn_block", fuse0, hidden);
    ly_fmap down = lite_down(&b, "down_sample2", out0);
    ly_fmap fuse1 = {ly_build_binary(&b, LY_OP_ADD, "pan", p32.v, down.v), hidden, p32.h, p32.w};
    ly_fmap out1 = rep_ncsp_elan4(&b, "pan_block", fuse1, hidden);
    outs[0] = out0.v;
    outs[1] = out1.v;
    return b.st;
}
