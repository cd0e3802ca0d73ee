/* SPDX-License-Identifier: MIT */
/* HGNetv2 as graph nodes (dfine.h; detr.md 4, LibreYOLO's models/deim/backbone.py). */
#include "models/dfine/dfine.h"

#include "core/core.h"
#include "models/common/fold.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* backbone.py's arch_configs: stem channels, then per stage in, mid, out
 * channels, blocks, downsample, light block, kernel size, layers. */
typedef struct hg_stage {
    int in, mid, out, blocks;
    bool downsample, light;
    int kernel, layers;
} hg_stage;

typedef struct hg_arch {
    const char *name;
    int stem[3];
    int n_stages;
    hg_stage stages[4];
} hg_arch;

static const hg_arch archs[] = {
    {"Atto",
     {3, 16, 16},
     3,
     {{16, 16, 64, 1, false, false, 3, 3},
      {64, 32, 256, 1, true, false, 3, 3},
      {256, 64, 256, 1, true, true, 3, 3}}},
    {"Femto",
     {3, 16, 16},
     3,
     {{16, 16, 64, 1, false, false, 3, 3},
      {64, 32, 256, 1, true, false, 3, 3},
      {256, 64, 512, 1, true, true, 5, 3}}},
    {"Pico",
     {3, 16, 16},
     3,
     {{16, 16, 64, 1, false, false, 3, 3},
      {64, 32, 256, 1, true, false, 3, 3},
      {256, 64, 512, 2, true, true, 5, 3}}},
    {"B0",
     {3, 16, 16},
     4,
     {{16, 16, 64, 1, false, false, 3, 3},
      {64, 32, 256, 1, true, false, 3, 3},
      {256, 64, 512, 2, true, true, 5, 3},
      {512, 128, 1024, 1, true, true, 5, 3}}},
    {"B1",
     {3, 24, 32},
     4,
     {{32, 32, 64, 1, false, false, 3, 3},
      {64, 48, 256, 1, true, false, 3, 3},
      {256, 96, 512, 2, true, true, 5, 3},
      {512, 192, 1024, 1, true, true, 5, 3}}},
    {"B2",
     {3, 24, 32},
     4,
     {{32, 32, 96, 1, false, false, 3, 4},
      {96, 64, 384, 1, true, false, 3, 4},
      {384, 128, 768, 3, true, true, 5, 4},
      {768, 256, 1536, 1, true, true, 5, 4}}},
    {"B3",
     {3, 24, 32},
     4,
     {{32, 32, 128, 1, false, false, 3, 5},
      {128, 64, 512, 1, true, false, 3, 5},
      {512, 128, 1024, 3, true, true, 5, 5},
      {1024, 256, 2048, 1, true, true, 5, 5}}},
    {"B4",
     {3, 32, 48},
     4,
     {{48, 48, 128, 1, false, false, 3, 6},
      {128, 96, 512, 1, true, false, 3, 6},
      {512, 192, 1024, 3, true, true, 5, 6},
      {1024, 384, 2048, 1, true, true, 5, 6}}},
    {"B5",
     {3, 32, 64},
     4,
     {{64, 64, 128, 1, false, false, 3, 6},
      {128, 128, 512, 2, true, false, 3, 6},
      {512, 256, 1024, 5, true, true, 5, 6},
      {1024, 512, 2048, 2, true, true, 5, 6}}},
    {"B6",
     {3, 48, 96},
     4,
     {{96, 96, 192, 2, false, false, 3, 6},
      {192, 192, 512, 3, true, false, 3, 6},
      {512, 384, 1024, 6, true, true, 5, 6},
      {1024, 768, 2048, 3, true, true, 5, 6}}},
};

/* How a checkpoint spells HGNetv2's keys: DEIM's backbone.py, or RT-DETR's
 * hgnetv2.py, whose padded stem convs sit in a Sequential after their
 * ZeroPad2d (conv.1) and whose aggregation convs have names, not indices. */
typedef struct hg_keys {
    const char *padded_conv, *squeeze, *excitation;
} hg_keys;

static const hg_keys deim_keys = {"conv", "aggregation.0", "aggregation.1"};
static const hg_keys rtdetr_keys = {"conv.1", "aggregation_squeeze_conv",
                                    "aggregation_excitation_conv"};

static ly_graph_value lab(ly_builder *b, const char *name, ly_graph_value x);

/* ConvBNAct at `name`: Conv2d (pad (k-1)/2) with its BN folded in, ReLU,
 * then the LearnableAffineBlock s*x + b when it has one (`lab`: only after an
 * activation), as the convolution's post-affine: the same two f32 operations
 * in its epilogue instead of two passes over the map (D-FINE-n: 52 nodes). */
static ly_fmap conv_bn_act_at(ly_builder *b, const char *name, const char *conv, ly_fmap x,
                              int64_t cout, int64_t k, int64_t stride, bool depthwise, bool act,
                              bool use_lab)
{
    float affine[2];
    bool with_lab = act && use_lab;
    if (with_lab) {
        char key[2 * LY_KEY_MAX];
        int64_t one = 1;
        snprintf(key, sizeof key, "%.100s.lab.scale", name);
        const float *scale = ly_build_take(b, key, 1, &one);
        snprintf(key, sizeof key, "%.100s.lab.bias", name);
        const float *shift = ly_build_take(b, key, 1, &one);
        if (!scale || !shift) return (ly_fmap){LY_GRAPH_NONE, cout, 0, 0};
        affine[0] = scale[0];
        affine[1] = shift[0];
    }
    return ly_build_conv_norm_at(b, name, conv, "bn", x, cout, k, stride, depthwise,
                                 act ? LY_ACT_RELU : LY_ACT_NONE, with_lab ? affine : NULL);
}

static ly_fmap conv_bn_act(ly_builder *b, const char *name, ly_fmap x, int64_t cout, int64_t k,
                           int64_t stride, bool depthwise, bool act, bool use_lab)
{
    return conv_bn_act_at(b, name, "conv", x, cout, k, stride, depthwise, act, use_lab);
}

/* F.pad(x, (0, 1, 0, 1)): a zero column on the right, a zero row below. */
static ly_fmap pad_right_bottom(ly_builder *b, const char *name, ly_fmap x)
{
    ly_fmap y = {LY_GRAPH_NONE, x.c, x.h + 1, x.w + 1};
    int64_t col[4] = {1, x.c, x.h, 1}, row[4] = {1, x.c, 1, x.w + 1};
    float *zeros = calloc((size_t)(x.c * (x.w + 1 > x.h ? x.w + 1 : x.h)), sizeof *zeros);
    if (!zeros) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
        return y;
    }
    char node_name[LY_KEY_MAX];
    snprintf(node_name, sizeof node_name, "%s%s", b->prefix, name);
    ly_graph_value parts[2] = {x.v, ly_build_constant(b, 4, col, zeros)};
    ly_graph_value wider = LY_GRAPH_NONE;
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_concat(b->g, node_name, 2, parts, 3, &wider));
    ly_graph_value rows[2] = {wider, ly_build_constant(b, 4, row, zeros)};
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_concat(b->g, node_name, 2, rows, 2, &y.v));
    free(zeros);
    return y;
}

/* LearnableAffineBlock s * x + b after an activation (keys <name>.lab.*). */
static ly_graph_value lab(ly_builder *b, const char *name, ly_graph_value x)
{
    char key[2 * LY_KEY_MAX];
    int64_t one = 1;
    snprintf(key, sizeof key, "%.100s.lab.scale", name);
    ly_graph_value scale = ly_build_weight(b, key, 1, &one);
    snprintf(key, sizeof key, "%.100s.lab.bias", name);
    ly_graph_value shift = ly_build_weight(b, key, 1, &one);
    return ly_build_binary(b, LY_OP_ADD, key, ly_build_binary(b, LY_OP_MUL, key, x, scale), shift);
}

/* stem3 (3x3 s2 ConvBNAct) on concat(pool, stem2b) as the sum of its two
 * halves' convolutions: the same sums in another order, without the
 * concatenated map (at 640 the largest tensor of the network, 13 MB) ever
 * existing. Each half is computed as soon as its input is, so stem2b's map
 * is gone before the pool's is made. */
static ly_fmap stem3_split(ly_builder *b, ly_fmap pooled_src, ly_fmap s2b, int64_t mid,
                           bool use_lab)
{
    ly_fmap none = {LY_GRAPH_NONE, mid, 0, 0};
    int64_t cin = 2 * mid, per = cin * 9;
    double *w = malloc((size_t)(mid * per) * sizeof *w), *bias = malloc((size_t)mid * sizeof *bias);
    double *half = malloc((size_t)(mid * mid * 9) * sizeof *half);
    double *zero = calloc((size_t)mid, sizeof *zero);
    if (!w || !bias || !half || !zero) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
    } else if (ly_fold_conv_bn(b, "stem.stem3.conv.weight", "stem.stem3.bn", mid, cin, 3, w,
                               bias)) {
        ly_fmap parts[2];
        for (int h = 1; h >= 0; h--) { /* stem2b's half first: it is ready */
            for (int64_t o = 0; o < mid; o++)
                memcpy(half + o * mid * 9, w + o * per + h * mid * 9,
                       (size_t)(mid * 9) * sizeof *half);
            ly_fmap in =
                h ? s2b : (ly_fmap){LY_GRAPH_NONE, mid, pooled_src.h - 1, pooled_src.w - 1};
            if (!h) {
                /* MaxPool 2x2 s1 (ceil_mode changes nothing at stride 1) on the padded stem1 */
                ly_pool2d_params p = LY_POOL2D_DEFAULTS;
                p.kernel[0] = p.kernel[1] = 2;
                char name[LY_KEY_MAX];
                snprintf(name, sizeof name, "%sstem.pool", b->prefix);
                if (b->st == LY_OK)
                    ly_build_fail(b, ly_graph_max_pool2d(b->g, name, pooled_src.v, &p, &in.v));
            }
            parts[h] = ly_build_conv_folded(b, h ? "stem.stem3.b" : "stem.stem3.a", in, half,
                                            h ? zero : bias, mid, 3, 2, 1, LY_ACT_NONE, NULL);
        }
        ly_fmap y = parts[0];
        y.v = ly_build_binary(b, LY_OP_ADD, "stem.stem3", parts[0].v, parts[1].v);
        y.v = ly_build_node(b, LY_OP_RELU, "stem.stem3.act", 1, &y.v, NULL);
        if (use_lab) y.v = lab(b, "stem.stem3", y.v);
        none = y;
    }
    free(w);
    free(bias);
    free(half);
    free(zero);
    return none;
}

static ly_fmap stem(ly_builder *b, const hg_arch *a, const hg_keys *keys, ly_fmap x, bool use_lab)
{
    int64_t mid = a->stem[1], out = a->stem[2];
    ly_fmap s1 = conv_bn_act(b, "stem.stem1", x, mid, 3, 2, false, true, use_lab);
    ly_fmap padded = pad_right_bottom(b, "stem.pad1", s1);
    ly_fmap s2 = conv_bn_act_at(b, "stem.stem2a", keys->padded_conv, padded, mid / 2, 2, 1, false,
                                true, use_lab);
    s2 = pad_right_bottom(b, "stem.pad2", s2);
    s2 = conv_bn_act_at(b, "stem.stem2b", keys->padded_conv, s2, mid, 2, 1, false, true, use_lab);
    ly_fmap s3 = stem3_split(b, padded, s2, mid, use_lab);
    return conv_bn_act(b, "stem.stem4", s3, out, 1, 1, false, true, use_lab);
}

/* HG_Block: n layers, concat of the input and every layer's output, the "se"
 * aggregation (squeeze 1x1 to out/2, excitation 1x1 to out), and the
 * residual for every block but a stage's first. */
static ly_fmap hg_block(ly_builder *b, const hg_keys *keys, const char *name, ly_fmap x,
                        const hg_stage *s, bool residual, bool lab)
{
    ly_graph_value outs[LY_KERNEL_MAX_INPUTS];
    int n = 0;
    outs[n++] = x.v;
    ly_fmap y = x;
    char key[LY_KEY_MAX];
    for (int i = 0; i < s->layers && n < LY_KERNEL_MAX_INPUTS; i++) {
        if (s->light) {
            snprintf(key, sizeof key, "%.100s.layers.%d.conv1", name, i);
            y = conv_bn_act(b, key, y, s->mid, 1, 1, false, false, lab);
            snprintf(key, sizeof key, "%.100s.layers.%d.conv2", name, i);
            y = conv_bn_act(b, key, y, s->mid, s->kernel, 1, true, true, lab);
        } else {
            snprintf(key, sizeof key, "%.100s.layers.%d", name, i);
            y = conv_bn_act(b, key, y, s->mid, s->kernel, 1, false, true, lab);
        }
        outs[n++] = y.v;
    }
    ly_fmap cat = {LY_GRAPH_NONE, x.c + (int64_t)s->layers * s->mid, x.h, x.w};
    char node_name[LY_KEY_MAX];
    snprintf(node_name, sizeof node_name, "%.40s%.100s.cat", b->prefix, name);
    if (b->st == LY_OK) ly_build_fail(b, ly_graph_concat(b->g, node_name, n, outs, 1, &cat.v));
    snprintf(key, sizeof key, "%.100s.%s", name, keys->squeeze);
    ly_fmap agg = conv_bn_act(b, key, cat, s->out / 2, 1, 1, false, true, lab);
    snprintf(key, sizeof key, "%.100s.%s", name, keys->excitation);
    agg = conv_bn_act(b, key, agg, s->out, 1, 1, false, true, lab);
    if (residual) agg.v = ly_build_binary(b, LY_OP_ADD, node_name, agg.v, x.v);
    return agg;
}

static ly_status hgnetv2(ly_graph *g, const ly_checkpoint *ck, const hg_keys *keys,
                         const char *arch_name, bool use_lab, ly_graph_value image, int64_t height,
                         int64_t width, int n_out, const int *return_idx, ly_graph_value *outs)
{
    const hg_arch *a = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcasecmp(archs[i].name, arch_name) == 0) a = &archs[i];
    if (!a)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "HGNetv2: no architecture '%s' (Atto, Femto, Pico, B0-B6)", arch_name);
    for (int i = 0; i < n_out; i++)
        if (return_idx[i] < 0 || return_idx[i] >= a->n_stages)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "HGNetv2 %s: no stage %d", a->name,
                                return_idx[i]);
    ly_builder b = {.g = g, .ck = ck, .what = "HGNetv2", .prefix = "backbone.", .st = LY_OK};
    ly_fmap x = stem(&b, a, keys, (ly_fmap){image, 3, height, width}, use_lab);
    char name[LY_KEY_MAX];
    for (int s = 0; s < a->n_stages && b.st == LY_OK; s++) {
        const hg_stage *st = &a->stages[s];
        if (x.c != st->in)
            return ly_set_error(LY_E_INTERNAL, "HGNetv2 %s: stage %d takes %d channels", a->name, s,
                                st->in);
        if (st->downsample) {
            snprintf(name, sizeof name, "stages.%d.downsample", s);
            x = conv_bn_act(&b, name, x, x.c, 3, 2, true, false, use_lab);
        }
        for (int k = 0; k < st->blocks; k++) {
            snprintf(name, sizeof name, "stages.%d.blocks.%d", s, k);
            x = hg_block(&b, keys, name, x, st, k != 0, use_lab);
        }
        for (int i = 0; i < n_out; i++)
            if (return_idx[i] == s) outs[i] = x.v;
    }
    return b.st;
}

ly_status ly_dfine_hgnetv2(ly_graph *g, const ly_checkpoint *ck, const char *arch, bool use_lab,
                           ly_graph_value image, int64_t height, int64_t width, int n_out,
                           const int *return_idx, ly_graph_value *outs)
{
    return hgnetv2(g, ck, &deim_keys, arch, use_lab, image, height, width, n_out, return_idx, outs);
}

ly_status ly_rtdetr_hgnetv2(ly_graph *g, const ly_checkpoint *ck, const char *arch,
                            ly_graph_value image, int64_t height, int64_t width,
                            ly_graph_value outs[3])
{
    /* hgnetv2.py's L and X configurations are backbone.py's B4 and B5 */
    const char *as = strcasecmp(arch, "L") == 0 ? "B4" : strcasecmp(arch, "X") == 0 ? "B5" : NULL;
    if (!as)
        return ly_set_error(LY_E_UNSUPPORTED, "HGNetv2: RT-DETR has no size '%s' (L, X)", arch);
    static const int stages[3] = {1, 2, 3};
    return hgnetv2(g, ck, &rtdetr_keys, as, false, image, height, width, 3, stages, outs);
}
