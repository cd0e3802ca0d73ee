/* SPDX-License-Identifier: MIT */
/* The Swin V1 recipe (recipe.h): LibreYOLO's LibreSwin classifiers (sizes t,
 * s, b, l; ../shared/specs/swin.md §3): patch embedding, four stages of
 * shifted-window blocks with patch merging between them, the final norm,
 * the mean over the map and the head; the eval transform ViT's (crop 0.9,
 * bicubic, ImageNet mean/std); window attention in the manual form by default
 * (fused_attn False on every WindowAttention, as LibreYOLO), the sdpa slot
 * after set_fused_attention, both the same bits. */
#include "models/recipe.h"

#include "core/core.h"
#include "graph/graph.h"
#include "libreyolo/sdpa.h"
#include "models/common/builder.h"
#include "models/common/classify.h"
#include "models/common/windows.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IMGSZ = 224, PATCH = 4, WINDOW = 7, SHIFT = 3, STAGES = 4, TABLE_ROWS = 169 };
#define CROP_PCT 0.9
#define NORM_EPS 1e-5

typedef struct swin_size {
    const char *size;
    int64_t width; /* C: stage s is C * 2^s wide */
    int depths[STAGES], heads[STAGES];
} swin_size;

static const swin_size sizes[] = {
    {"t", 96, {2, 2, 6, 2}, {3, 6, 12, 24}},
    {"s", 96, {2, 2, 18, 2}, {3, 6, 12, 24}},
    {"b", 128, {2, 2, 18, 2}, {4, 8, 16, 32}},
    {"l", 192, {2, 2, 18, 2}, {6, 12, 24, 48}},
};

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f},
                   imagenet_std[3] = {0.229f, 0.224f, 0.225f};

/* What a loaded model keeps: where to rebuild it from when the flag changes. */
typedef struct swin_data {
    ly_classify_flagged flag; /* first: the shared hooks read it */
    const swin_size *z;
} swin_data;

static int window_attentions(const swin_size *z)
{
    return z->depths[0] + z->depths[1] + z->depths[2] + z->depths[3];
}

static int64_t extent(const ly_checkpoint *ck, const char *key, int dim, int ndim)
{
    return ly_model_key_extent(ck, key, dim, ndim);
}

/* detect_size (§3.3): patch [C, 3, 4, 4], 169 bias-table rows, head.fc [nc,
 * 8C], stage 2's depth by its blocks 0..n-1. */
static const swin_size *detect_size(const ly_checkpoint *ck, char *why, size_t cap)
{
    int64_t c = extent(ck, "patch_embed.proj.weight", 0, 4);
    bool patch = c > 0 && extent(ck, "patch_embed.proj.weight", 1, 4) == 3 &&
                 extent(ck, "patch_embed.proj.weight", 2, 4) == PATCH &&
                 extent(ck, "patch_embed.proj.weight", 3, 4) == PATCH;
    bool rest =
        extent(ck, "layers.0.blocks.0.attn.relative_position_bias_table", 0, 2) == TABLE_ROWS &&
        extent(ck, "head.fc.weight", 1, 2) == 8 * c;
    int depth = 0;
    for (;; depth++) {
        char key[64];
        snprintf(key, sizeof key, "layers.2.blocks.%d.norm1.weight", depth);
        if (extent(ck, key, 0, 1) < 0) break;
    }
    snprintf(why, cap,
             "patch_embed.proj.weight [C, 3, 4, 4], a 169-row relative position bias table, "
             "head.fc.weight [classes, 8C] and stage 2 of 6 or 18 blocks; found C = %lld, %d "
             "blocks",
             (long long)c, depth);
    if (!patch || !rest) return NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].width == c && sizes[i].depths[2] == depth) return &sizes[i];
    return NULL;
}

/* can_load: Swin V1's keys (SwinV2's cpb_mlp and logit_scale refused) and a size. */
static bool accepts_keys(const ly_checkpoint *ck, const char *path)
{
    (void)path;
    static const char *const needed[] = {"patch_embed.proj.weight",
                                         "layers.0.blocks.0.attn.relative_position_bias_table",
                                         "norm.weight", "head.fc.weight"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        ly_tensor view;
        if (ly_checkpoint_find(ck, needed[i], &view) != LY_OK) {
            ly_clear_error();
            return false;
        }
    }
    if (ly_model_has_key_containing(ck, "cpb_mlp") ||
        ly_model_has_key_containing(ck, "logit_scale"))
        return false;
    char why[256];
    return detect_size(ck, why, sizeof why) != NULL;
}

/* Window attention (§1.1) on the windows x [nW, 49, c] of a map whose shifted
 * blocks add `mask` ([nW, 1, 49, 49]; NONE unshifted): q, k and v linears
 * (the qkv weight's (q | k | v) rows) writing [nW, 49, heads, d]; fused, the
 * sdpa slot tokens first with the bias and the mask; manual, the graph's own
 * (q * d^-0.5) @ k^T + bias + mask, softmax, @ v on heads first. Then proj. */
static ly_graph_value window_attention(ly_builder *b, ly_graph_value x, int64_t windows, int64_t c,
                                       int heads, ly_graph_value mask, bool fused)
{
    int64_t n = WINDOW * WINDOW, d = c / heads, wshape[2] = {3 * c, c}, three_c = 3 * c;
    const float *w = ly_build_take(b, "attn.qkv.weight", 2, wshape);
    const float *bias = ly_build_take(b, "attn.qkv.bias", 1, &three_c);
    ly_graph_value rel =
        ly_build_relative_bias(b, "attn.relative_position_bias_table", WINDOW, heads);
    if (!w || !bias || b->st != LY_OK) return LY_GRAPH_NONE;
    static const char *const names[3] = {"attn.q", "attn.k", "attn.v"};
    int64_t split[4] = {windows, n, heads, d}, one[2] = {c, c}, merged[3] = {windows, n, c};
    ly_graph_value part[3];
    for (int i = 0; i < 3; i++) {
        ly_graph_value in[3] = {x, ly_build_constant(b, 2, one, w + (size_t)(i * c * c)),
                                ly_build_constant(b, 1, &c, bias + (size_t)(i * c))};
        part[i] = ly_build_reshape(b, names[i],
                                   ly_build_node(b, LY_OP_LINEAR, names[i], 3, in, NULL), 4, split);
    }
    ly_graph_value o;
    if (fused) {
        ly_sdpa_params p = LY_SDPA_DEFAULTS; /* d^-0.5 on q */
        p.layout = LY_SDPA_BNHD;
        ly_graph_value in[5] = {part[0], part[1], part[2], rel, mask};
        o = ly_build_node(b, LY_OP_SDPA, "attn.sdpa", mask == LY_GRAPH_NONE ? 4 : 5, in, &p);
    } else {
        int64_t heads_first[4] = {0, 2, 1, 3};
        for (int i = 0; i < 3; i++)
            part[i] = ly_build_permute(b, names[i], part[i], 4, heads_first);
        ly_graph_value q = ly_build_binary(b, LY_OP_MUL, "attn.scale", part[0],
                                           ly_build_scalar(b, (float)(1.0 / sqrt((double)d))));
        ly_matmul_params t = {.transpose_b = 1};
        ly_graph_value qk[2] = {q, part[1]};
        ly_graph_value s = ly_build_node(b, LY_OP_MATMUL, "attn.scores", 2, qk, &t);
        s = ly_build_binary(b, LY_OP_ADD, "attn.bias", s, rel);
        if (mask != LY_GRAPH_NONE) s = ly_build_binary(b, LY_OP_ADD, "attn.mask", s, mask);
        ly_axis_params last = {.axis = -1};
        s = ly_build_node(b, LY_OP_SOFTMAX, "attn.softmax", 1, &s, &last);
        ly_matmul_params plain = LY_MATMUL_DEFAULTS;
        ly_graph_value pv[2] = {s, part[2]};
        o = ly_build_node(b, LY_OP_MATMUL, "attn.values", 2, pv, &plain);
        o = ly_build_permute(b, "attn.merge", o, 4, heads_first);
    }
    o = ly_build_reshape(b, "attn.merge", o, 3, merged);
    return ly_build_linear(b, "attn.proj", o, c, c);
}

/* The shift mask of an s x s map as a constant [nW, 1, 49, 49]. */
static ly_graph_value shift_mask(ly_builder *b, int64_t side)
{
    int64_t windows = (side / WINDOW) * (side / WINDOW), n = WINDOW * WINDOW;
    int64_t shape[4] = {windows, 1, n, n};
    float *m = malloc((size_t)(windows * n * n) * sizeof *m);
    if (!m) {
        ly_build_fail(b, ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", b->what));
        return LY_GRAPH_NONE;
    }
    ly_window_shift_mask(side, side, WINDOW, SHIFT, m);
    ly_graph_value v = ly_build_constant(b, 4, shape, m);
    free(m);
    return v;
}

/* One block (§3.2 3) on x [1, side, side, c]; odd blocks shift by 3. */
static ly_graph_value block(ly_builder *b, ly_graph_value x, int64_t side, int64_t c, int heads,
                            bool shifted, ly_graph_value mask, bool fused)
{
    int64_t windows = (side / WINDOW) * (side / WINDOW), tokens[3] = {1, side * side, c};
    ly_graph_value y = ly_build_layer_norm(b, "norm1", x, c, NORM_EPS);
    if (shifted) y = ly_build_roll(b, "roll", y, side, side, -SHIFT);
    y = ly_build_window_partition(b, "windows", y, 1, side, side, c, WINDOW);
    y = window_attention(b, y, windows, c, heads, shifted ? mask : LY_GRAPH_NONE, fused);
    y = ly_build_window_reverse(b, "windows", y, 1, side, side, c, WINDOW);
    if (shifted) y = ly_build_roll(b, "unroll", y, side, side, SHIFT);
    x = ly_build_reshape(b, "tokens", ly_build_binary(b, LY_OP_ADD, "attn.residual", x, y), 3,
                         tokens);
    ly_graph_value m =
        ly_build_linear_fused(b, "mlp.fc1", ly_build_layer_norm(b, "norm2", x, c, NORM_EPS), 4 * c,
                              c, LY_ACT_GELU, LY_GRAPH_NONE);
    x = ly_build_linear_fused(b, "mlp.fc2", m, c, 4 * c, LY_ACT_NONE, x); /* + x */
    int64_t map[4] = {1, side, side, c};
    return ly_build_reshape(b, "map", x, 4, map);
}

/* PatchMerging (§3.2 2): the 2x2 quadrants (0,0), (1,0), (0,1), (1,1) as
 * (dy, dx) side by side, LayerNorm(4c), Linear 4c -> 2c without bias. */
static ly_graph_value merge(ly_builder *b, ly_graph_value x, int64_t side, int64_t c)
{
    int64_t split[6] = {1, side / 2, 2, side / 2, 2, c}, order[6] = {0, 1, 3, 4, 2, 5};
    int64_t merged[4] = {1, side / 2, side / 2, 4 * c};
    x = ly_build_permute(b, "quadrants", ly_build_reshape(b, "quadrants", x, 6, split), 6, order);
    x = ly_build_reshape(b, "quadrants", x, 4, merged);
    x = ly_build_layer_norm(b, "norm", x, 4 * c, NORM_EPS);
    int64_t wshape[2] = {2 * c, 4 * c};
    ly_graph_value in[2] = {x, ly_build_weight(b, "reduction.weight", 2, wshape)};
    return ly_build_node(b, LY_OP_LINEAR, "reduction", 2, in, NULL);
}

static ly_status build(const ly_checkpoint *ck, const swin_size *z, int64_t classes, bool fused,
                       ly_graph *g)
{
    ly_builder b = {.g = g, .ck = ck, .what = "Swin", .st = LY_OK};
    int64_t c = z->width, side = IMGSZ / PATCH;
    ly_graph_value image;
    ly_build_fail(&b, ly_graph_input(g, "images", LY_F32, 4, &image));

    /* PatchEmbed: conv 4x4 /4 with bias, NCHW -> NHWC, LayerNorm */
    int64_t wshape[4] = {c, 3, PATCH, PATCH}, to_hwc[4] = {0, 2, 3, 1};
    ly_graph_value w = ly_build_weight(&b, "patch_embed.proj.weight", 4, wshape);
    ly_graph_value bias = ly_build_weight(&b, "patch_embed.proj.bias", 1, &c);
    ly_conv2d_params cp = LY_CONV2D_DEFAULTS;
    cp.stride[0] = cp.stride[1] = PATCH;
    ly_graph_value x = LY_GRAPH_NONE;
    if (b.st == LY_OK)
        ly_build_fail(
            &b, ly_graph_conv2d(g, "patch_embed.proj", image, w, bias, LY_GRAPH_NONE, &cp, &x));
    snprintf(b.prefix, sizeof b.prefix, "patch_embed.");
    x = ly_build_layer_norm(&b, "norm", ly_build_permute(&b, "proj", x, 4, to_hwc), c, NORM_EPS);

    for (int s = 0; s < STAGES && b.st == LY_OK; s++) {
        if (s > 0) {
            snprintf(b.prefix, sizeof b.prefix, "layers.%d.downsample.", s);
            x = merge(&b, x, side, c);
            side /= 2;
            c *= 2;
        }
        ly_graph_value mask = shift_mask(&b, side); /* one per stage, its blocks share it */
        for (int j = 0; j < z->depths[s] && b.st == LY_OK; j++) {
            snprintf(b.prefix, sizeof b.prefix, "layers.%d.blocks.%d.", s, j);
            x = block(&b, x, side, c, z->heads[s], j % 2 == 1, mask, fused);
        }
    }
    /* head (§3.2 4): LayerNorm(8C), mean over H and W, head.fc */
    b.prefix[0] = '\0';
    x = ly_build_layer_norm(&b, "norm", x, c, NORM_EPS);
    int64_t to_chw[4] = {0, 3, 1, 2}, pooled[2] = {1, c};
    x = ly_build_permute(&b, "pool", x, 4, to_chw);
    ly_pool2d_params pp = LY_POOL2D_DEFAULTS;
    pp.kernel[0] = pp.kernel[1] = pp.stride[0] = pp.stride[1] = side;
    x = ly_build_reshape(&b, "pool", ly_build_node(&b, LY_OP_AVG_POOL2D, "pool", 1, &x, &pp), 2,
                         pooled);
    ly_graph_value logits = ly_build_linear(&b, "head.fc", x, classes, c);
    if (b.st == LY_OK) ly_build_fail(&b, ly_graph_output(g, logits, "logits"));
    return b.st;
}

static ly_status build_net(const ly_checkpoint *ck, const ly_classify_flagged *f, int64_t classes,
                           bool fused, ly_graph *g)
{
    return build(ck, ((const swin_data *)f)->z, classes, fused, g);
}

static ly_status load(const ly_checkpoint *ck, const char *path, ly_model_desc *d)
{
    char why[256];
    const swin_size *z = detect_size(ck, why, sizeof why);
    if (!z)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: no Swin size has these keys (expected %s; t 96 "
                            "with 6, s 96, b 128, l 192 with 18)",
                            path, why);
    ly_status st = ly_model_meta_size_agrees(ck, path, "Swin", z->size);
    if (st != LY_OK) return st;
    int64_t imgsz;
    st = ly_model_meta_imgsz(ck, path, IMGSZ, 32, 4096, &imgsz);
    if (st != LY_OK) return st;
    if (imgsz != IMGSZ)
        return ly_set_error(LY_E_FORMAT,
                            "ly_model_load: %s: Swin takes 224x224 only; the metadata says imgsz "
                            "%lld",
                            path, (long long)imgsz);
    d->nc = extent(ck, "head.fc.weight", 0, 2);
    swin_data *data = calloc(1, sizeof *data);
    if (!data) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    snprintf(data->flag.path, sizeof data->flag.path, "%s", path);
    data->flag.what = "Swin";
    data->flag.modules = window_attentions(z); /* every WindowAttention: 12 on t, 24 on s-l */
    data->flag.build = build_net;
    data->z = z;
    /* LibreYOLO's fused_attn False: the manual form */
    return ly_classify_load(d, ck, &data->flag, false, z->size, IMGSZ);
}

static ly_status preprocess(const ly_model_desc *d, const ly_image_view *image, int64_t h,
                            int64_t w, float *input, ly_prep *prep)
{
    (void)d;
    (void)prep;
    if (h != IMGSZ || w != IMGSZ)
        return ly_set_error(LY_E_SHAPE, "Swin: the input is 224x224 (%lldx%lld asked)",
                            (long long)h, (long long)w);
    return ly_classify_eval_transform("Swin", image, IMGSZ, CROP_PCT, imagenet_mean, imagenet_std,
                                      input);
}

const ly_recipe ly_swin_recipe = {
    .family = "swin",
    .task = "classify",
    .input_description = "float32 RGB, PIL bicubic resize (antialiased) of the shorter side to "
                         "248, centre crop 224, ImageNet mean/std",
    .default_conf = 0.0f,
    .default_iou = 0.0f,
    .default_max_det = 5,
    .accepts_keys = accepts_keys,
    .load_checkpoint = load,
    .bind = ly_classify_bind,
    .free_data = free,
    .output_name = ly_classify_output_name,
    .set_fused_attention = ly_classify_set_fused,
    .fused_attention = ly_classify_fused_state,
    .capture_graph = ly_classify_capture_graph,
    .preprocess = preprocess,
    .probabilities = ly_classify_probabilities,
    .file_prefix = "LibreSwin",
    .published_sizes = (const char *const[]){"t", "s", "b", "l", NULL},
    .crop_pct = CROP_PCT,
    .interpolation = "bicubic",
};
